// Policy: what the shim does to sockets a config rule matched
// (docs/policy-config.md). nodelay, sndbuf and rcvbuf are set once when the
// socket connects or is accepted; cork and coalesce take the socket's writes
// and keep what they hold in a process-wide set that reads, waits, the exit
// paths and a deadline thread release. The parts: policy_state.h (a
// socket's state and turn), held_set, coalesce, cork, deadline_thread and
// policy_load; this file ties them to the hooks.
#ifndef TCPADVISE_POLICY_H_
#define TCPADVISE_POLICY_H_

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>

#include "config.h"
#include "held_set.h"
#include "policy_state.h"
#include "socket_state.h"

namespace tcpadvise {

// g_policy_config is the loaded config, or nullptr when the shim only observes.
extern const PolicyConfig* g_policy_config;

// g_fail_open is the reason the policy turned itself off (PolicyFailOpen),
// or nullptr.
extern std::atomic<const char*> g_fail_open;
inline bool PolicyOff() { return g_fail_open.load(std::memory_order_relaxed) != nullptr; }

// PolicyTakesRead tells whether a read on a tracked socket goes through the
// policies' read path (hooks.cc: ReadUnderPolicy): some socket holds bytes
// that must leave before the read waits for their answer, or quickack is
// to be re-armed. Otherwise, as under an observe-only config, the read is
// only recorded. One load (held_set.h: g_read_gate): only a policy holds
// (AttachPolicy needs a config), and UseConfig gates every read once the
// config is loaded when a rule re-arms quickack.
inline bool PolicyTakesRead() { return ReadGated(); }

// LoadPolicyConfig reads the file with libtcpadvise_config.so (found beside
// the shim); on any mistake it warns once and leaves the shim observing
// (policy_load.cc).
void LoadPolicyConfig(const char* path);

// PolicyFailOpen turns cork and coalesce off for the rest of the process
// after an internal failure (reason: a short phrase): what is held is
// released, every later write passes through, one warning says so, and the
// trace records it (PolicyFailOpenReason). Safe to call more than once.
void PolicyFailOpen(const char* reason);

// PolicyFailOpenReason is the first fail-open reason, or nullptr.
const char* PolicyFailOpenReason();

// AttachPolicy chooses the socket's rule and applies nodelay, sndbuf and
// rcvbuf through fd; peer may be nullptr. The table mutex must be held.
void AttachPolicy(int fd, SocketState* s, const sockaddr* peer);

// PolicyWrite runs a write-family call on a socket whose policy takes writes.
// iov describes the application's bytes (app_iov: the iovec array itself is
// the application's, to be read safely); passthrough performs the original
// call unchanged. Returns what the application must see, errno set likewise.
ssize_t PolicyWrite(SocketState* s, int fd, const iovec* iov, int iovcnt, bool app_iov, int flags, bool special,
                    ssize_t (*passthrough)(void* context), void* context);

// PassesUnheld is the write path of an adaptive cork or coalesce policy for
// a steady passive socket (adapt.h: AdaptSteady): a burst's first write,
// which the rule passes leaving the shape as it is, on a socket that holds
// nothing. It counts the burst passed, as PolicyWrite would, without the
// socket's turn; true: the caller makes the call itself, as if no policy
// took the socket. False for anything else (PolicyWrite then decides),
// changing nothing. The test is one word: the pass the turn's last holder
// published (GiveTurn: the shape steady, nothing held, corked or left by a
// signal handler, the socket not gone, the policy on) with the turn free.
//
// Why the write cannot pass bytes a policy holds or is releasing: a holder
// publishes the pass with release (SocketTurn::Give), only after the kernel
// took what it released, and this reads it with acquire. Holding anything
// again takes the turn first, which clears the pass in the same atomic
// step; a signal handler's write into the overflow, which takes no turn,
// vetoes it (SignalWrite), as does a bypass. So whatever was held before
// this write (by this thread, or by a write the application ordered before
// it with its own synchronization) either is still seen, and the write
// takes PolicyWrite behind it, or reached the kernel's socket queue before
// the pass this write sees was given. A holder mid-release or mid-write
// (the deadline thread, a ReleaseAll in another thread) has the turn, so no
// pass. A write of another thread at the same time is not ordered against
// this one, as in the kernel without the shim. A signal handler's write
// that interrupted the shim passes as PolicyWrite would pass it (nothing
// held, the turn not its thread's). An orphaned state needs no test: while
// its blocked writer holds the turn there is no pass.
[[gnu::always_inline]] inline bool PassesUnheld(SocketState* s, PolicyState* p) {
  if (!p->lock.Passes() || s->stats.burst_open_writes.Get() != 0) return false;
  p->passed.Increment();
  return true;
}

// ReleaseAll flushes or uncorks every socket that holds something, waiting
// for a blocking socket's buffer if need be; one load when none holds
// anything (ReleaseHeld does the rest, out of line).
void ReleaseHeld(FlushCause cause);
inline void ReleaseAll(FlushCause cause) {
  if (__builtin_expect(AnyHeld(), 0)) ReleaseHeld(cause);
}

// ReleaseSocket flushes or uncorks one socket, before it is closed, shut down
// or replaced: bytes are sent even if that means waiting (up to about 5 s on
// a peer that reads nothing).
void ReleaseSocket(SocketState* s, int fd, FlushCause cause);

// PolicySocketGone drops what a policy still holds once the table lets go of
// the socket's last fd: what the peer would not take in time is counted as a
// deferred error_value (ETIMEDOUT after a close, EBADF after a close the
// shim did not see) and never sent into whatever reuses the fd number. The
// table mutex is held: it never waits for the socket's turn (a writer
// blocked in the kernel keeps a state the entry then leaves behind).
void PolicySocketGone(SocketState* s, int error_value);

// OnShutdown notes a successful shutdown(how) of the socket.
void OnShutdown(SocketState* s, int how);

// NoteConflict records an option the application set that its socket's
// policy sets too: the application's value stands.
void NoteConflict(SocketState* s, AppOption option);

// OnApplicationCork notes the application's own TCP_CORK: it wins, and the
// policy stops corking the socket. The conflict is counted by the caller.
void OnApplicationCork(SocketState* s, int fd);

// AfterReadPolicy sends TCP_QUICKACK after a read that got data, when the policy asks.
void AfterReadPolicy(SocketState* s, int fd);

// PolicyFdClosed moves a policy's fd to another fd of the same socket when
// the one it used is closed while dups remain.
void PolicyFdClosed(SocketState* s, int closed_fd, int other_fd);

// ResetPolicyInChild frees a socket's policy lock in a fork child (a parent
// thread may have held it at the fork).
void ResetPolicyInChild(PolicyState* p);

// FreeTurnInChild frees a socket's turn in the child of a fork from a
// signal handler that interrupted the shim: another thread's (the deadline
// thread's flush) is nobody's there, and the forking thread's section, which
// goes on when the handler returns, cannot tell whether it took its turn
// before the fork (t_inside is set first): it finds it free, or holds it
// alone, the child having no other thread and a handler taking no turn.
void FreeTurnInChild(PolicyState* p);

// DropHeldInChild forgets, in a fork child, the bytes the parent holds (the
// parent sends them) so they are never sent twice.
// forking_tid: the fork came from a signal handler inside the shim, on the
// thread of that id in the parent (held_set.h: ClearHeldSetInChild); the
// socket whose turn the handler's section holds is left to that section
// (policy_state.h: g_section_forked).
void DropHeldInChild(pid_t forking_tid = 0);

// PolicyBeforeBypass sends what fd's socket holds before a call the shim
// cannot order after held bytes (a raw syscall write, splice, stdio) and,
// when bypass, stops holding anything on that socket for good.
void PolicyBeforeBypass(int fd, bool bypass);

// PolicyForgetClosedFd retires a table entry left on fd by a close the shim
// did not see, now that fd is something else: what its policy held is
// dropped (a deferred EBADF), never sent into the new file.
void PolicyForgetClosedFd(int fd);

// Turns and releases, for the policy's own files (deadline_thread.cc).
// TryTakeTurn takes p's turn without waiting; GiveTurn gives it back after
// sending what signal handlers wrote meanwhile; both keep errno; ReleaseTaken lets go of
// what p holds (verify: first check that its fd is still its socket).
bool TryTakeTurn(PolicyState* p);
void GiveTurn(PolicyState* p);
void ReleaseTaken(PolicyState* p, FlushCause cause, bool verify, bool may_block, bool exiting);

// InsidePolicy tells whether this thread is inside policy code that holds a
// lock: a signal handler that interrupted it must not take policy locks.
bool InsidePolicy();

}  // namespace tcpadvise

#endif  // TCPADVISE_POLICY_H_
