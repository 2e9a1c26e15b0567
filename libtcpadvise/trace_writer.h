// TraceWriter: serialises the socket table as one JSON trace per process
// (schema https://tcpadvise.dev/schemas/trace/1, advisor/tcpadvise/schemas/trace-1.schema.json)
// and puts it in place atomically: temp file, then rename.
#ifndef TCPADVISE_TRACE_WRITER_H_
#define TCPADVISE_TRACE_WRITER_H_

#include <stdint.h>

namespace tcpadvise {

class JsonWriter;
struct SocketStats;

// WriteTrace writes <out>/<program>.<pid>.json if the process has any TCP
// socket worth reporting (a fork child's final trace: a record of its
// parent's spool, SpoolBeforeFork) (<program>: the name made safe for a file name and
// cut to 64 bytes; the trace's "program" holds it whole); final marks the exit trace, after which snapshots
// stop. A failure prints one warning per process and is otherwise ignored.
void WriteTrace(bool final);

// SpoolBeforeFork, in the fork prepare handler of a process that tracked a
// socket, with the trace writer's lock held: before the first fork, maps
// the spool its fork children write their final traces to (trace_spool.h,
// <out>/<program>.<pid>.<nonce>.spool); later, one read of the spool's
// header, and a new spool once it is half full. A failure: one warning, no
// spool, the children write trace files.
void SpoolBeforeFork();

// SerializeTrace appends the trace document to w; false when there is no
// socket to report. The table mutex must be held; a snapshot (not final)
// lets go of it for a moment between runs of live sockets. represents: the
// fork children of one connection the trace stands for (SpoolSampleChild),
// written when more than 1.
bool SerializeTrace(JsonWriter* w, bool final, uint32_t represents = 1);

// EmitBurstWrites writes st's burst sizes in writes under "writes", with
// open_writes, the open burst's writes (0: none, or not recorded), as one
// more burst with its period's weight: the
// one-write bursts that st holds implicitly (SocketStats::ImpliedOneWriteBursts)
// as well as those burst_writes holds.
void EmitBurstWrites(JsonWriter* w, const SocketStats& st, uint64_t open_writes);

// NoteHostName reads the host name for the traces of this process and of
// the processes it forks later (RuntimeState::host); with the trace writer's
// lock held.
void NoteHostName();

// NoteNameKey draws the key of the traces' temporary names (SipHash24 of
// the process's pid, start and count of names) for this process and those
// it forks later (RuntimeState::name_key): one getrandom, with the first
// socket, where each trace's name took one (a fork child's, at its exit);
// with the trace writer's lock held. Without it (getrandom failed) each name
// draws its own nonce.
void NoteNameKey();

// SipHash24 is SipHash-2-4 (Aumasson and Bernstein) of count little-endian
// 64-bit words under a 128-bit key: without the key, nobody can tell the
// next name from the ones seen.
uint64_t SipHash24(const uint64_t key[2], const uint64_t* words, int count);

// LockTraceWriter and UnlockTraceWriter keep a fork from copying a
// half-written trace state.
void LockTraceWriter();
void UnlockTraceWriter();

}  // namespace tcpadvise

#endif  // TCPADVISE_TRACE_WRITER_H_
