// Runtime: the shim's life in a process: settings from the environment,
// start-up, the snapshot thread, fork, and the final trace at exit.
#ifndef TCPADVISE_RUNTIME_H_
#define TCPADVISE_RUNTIME_H_

#include <limits.h>
#include <stdint.h>

#include <atomic>

#include "clock.h"
#include "socket_state.h"
#include "trace_spool.h"

namespace tcpadvise {

// TCPADVISE_INTERVAL_DEFAULT is Settings' interval_s, a macro so that the
// warning of a bad TCPADVISE_INTERVAL spells it (runtime.cc).
#define TCPADVISE_INTERVAL_DEFAULT 5

// Settings are read once at start-up from TCPADVISE_OUT and TCPADVISE_INTERVAL.
struct Settings {
  char out_dir[PATH_MAX] = ".";
  // Seconds between periodic snapshots; 0 writes only at exit.
  double interval_s = TCPADVISE_INTERVAL_DEFAULT;
  // Which turns each socket records in full (TCPADVISE_TURNS_FIRST,
  // TCPADVISE_TURNS_EVERY).
  TurnSampling turns;
  // Which fork children of one connection write their final trace
  // (TCPADVISE_CHILD_TRACES_FIRST, TCPADVISE_CHILD_TRACES_EVERY).
  ChildTraceSampling child_traces;
};

// RuntimeState is what the trace writer needs to know about the process.
struct RuntimeState {
  // What a fork child writes comes first, in the page the shim's other state
  // a child writes shares (preload/child_layout.ld): a child copies one page
  // of the shim's data where it copied four.
  //
  // A fork child's start is its tick count (start_ticks); its wall-clock
  // start is worked out from it when a trace first needs it (StartUnixNs):
  // the child's handler then calls no clock_gettime, whose page of libc and
  // the vDSO's a child otherwise faults in only for it.
  uint64_t start_unix_ns = 0;
  uint64_t start_ticks = 0;
  // The process the state belongs to (set again in a fork child): a vfork
  // child, which shares the memory, has another pid.
  int pid = 0;
  // A fork child's parent, the process it was forked from (set in the
  // child, from the parent's pid); 0: the trace asks the kernel (getppid).
  int ppid = 0;
  // The stop signal the final trace was written for (signals.h), else 0.
  int stop_signal = 0;
  Settings settings;
  // The program's name at start-up, before any process title rewrites
  // argv[0]: its first 255 bytes, cut on a UTF-8 character boundary.
  char program[256] = "unknown";
  TickRate tick_rate;
  // The host name (trace_writer.h: NoteHostName), read with the process's
  // first socket and inherited by its fork children; empty until then.
  char host[65] = "";
  // The key of the traces' temporary names (trace_writer.h: NoteNameKey),
  // drawn with the process's first socket and inherited by its fork
  // children; name_key_drawn false until then.
  uint64_t name_key[2] = {0, 0};
  bool name_key_drawn = false;
};

extern RuntimeState g_runtime;

// ParseSettings reads settings from environment values (nullptr when unset);
// a bad value keeps its default, and *warning names every bad one in one line
// (nullptr when none).
Settings ParseSettings(const char* out_dir, const char* interval, const char** warning);

// ParseTurnSampling reads TCPADVISE_TURNS_FIRST (turns recorded in full,
// 0 to 2^40) and TCPADVISE_TURNS_EVERY (then one in every, a power of two
// from 1, every turn, to 65536) from environment values (nullptr when
// unset); a bad value keeps its default, and *warning names every bad one in
// one line (nullptr when none).
TurnSampling ParseTurnSampling(const char* first, const char* every, const char** warning);

// ParseChildTraceSampling reads TCPADVISE_CHILD_TRACES_FIRST (a service's
// fork children that write their trace, 0 to 2^40) and
// TCPADVISE_CHILD_TRACES_EVERY (then the last of every, a power of two from 1,
// every child, to 65536) as ParseTurnSampling does.
ChildTraceSampling ParseChildTraceSampling(const char* first, const char* every, const char** warning);

// RuntimeStart binds libc, reads the settings and arms the socket table; the
// shim stays inert (every call passes through) in setuid processes or when
// the table cannot be set up.
void RuntimeStart();

// StartUnixNs is the process's start in nanoseconds since the epoch; a fork
// child's is worked out from its start's tick count on first use.
uint64_t StartUnixNs();

// RuntimeStop flushes what the policies hold and writes the final trace
// (exit, or a fatal signal: signals.h); nothing when the process never
// tracked a socket. A child forked from inside the shim flushes only.
void RuntimeStop();

// RuntimeStopAtExitCall writes the final trace from _exit, which runs no
// destructor (a fork child's usual end): not in a vfork child, nor in a
// signal handler that interrupted the shim. Held bytes went out before.
void RuntimeStopAtExitCall();

// g_next_snapshot_tick is when the next periodic snapshot is due, in ticks;
// UINT64_MAX while none is due from the calling threads (snapshots off, or
// the snapshot thread has them).
extern std::atomic<uint64_t> g_next_snapshot_tick;

// SnapshotDue hands snapshots to the snapshot thread, or writes one from the
// calling thread when that thread cannot start (or has not yet in a fork
// child). The thread is what makes snapshots come on time in a program idle
// in epoll_wait; in a single-threaded program the shim's hot calls bypass
// glibc's cancellation bookkeeping meanwhile (SetDirectCalls).
void SnapshotDue(uint64_t now_ticks);

// MaybeSnapshot is the hot path's check: the calls that read the clock anyway
// compare it with the deadline and only then leave the fast path.
inline void MaybeSnapshot(uint64_t now_ticks) {
  if (__builtin_expect(now_ticks >= g_next_snapshot_tick.load(std::memory_order_relaxed), 0)) SnapshotDue(now_ticks);
}

// OnSocketTracked arms the first snapshot's deadline with the first tracked
// socket (socket, accept) and checks it.
void OnSocketTracked();

// OnConnectionTracked starts the snapshot thread, from the next call that
// reads the clock, with the process's first connection (accepted: true, or
// connected), so that its snapshots come on time whatever it does next
// (idle in epoll_wait with every connection open); not with its first
// socket, nor in a process that hands its connections to fork children
// (OnSocketClosing). glibc makes every fork of a process that ever started
// a second thread a multi-threaded fork (its malloc, stdio and name service
// locks taken before it and released on both sides after): some 10 page
// faults more and 29 us a connection of a fork-per-connection server
// (bench/fork_echo.c; README: "A fork-per-connection server"). Such a
// process writes its snapshots from its own calls as their deadlines pass.
void OnConnectionTracked(bool accepted);

// OnListening notes that the process listens (listen, or a listener it
// accepts on that it did not see made): until its first connection shows
// what it does with them, a snapshot deadline starts no thread.
void OnListening();

// OnSocketClosing notes a close of s: a server connection closed unused
// after a fork since the last accept is one the process handed to a fork
// child, and it starts no snapshot thread from then on.
void OnSocketClosing(const SocketState& s);

// NoteTrackFailure remembers, for the trace, that a socket could not be tracked.
void NoteTrackFailure(int fd);

// ShimWarnings returns a bit set of kWarn* flags.
uint32_t ShimWarnings();
constexpr uint32_t kWarnFdBeyondTable = 1u << 0;
constexpr uint32_t kWarnOutOfMemory = 1u << 1;
constexpr uint32_t kWarnSignalHandlerSocket = 1u << 2;

}  // namespace tcpadvise

#endif  // TCPADVISE_RUNTIME_H_
