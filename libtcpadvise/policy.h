// Policy: what the shim does to sockets a config rule matched
// (docs/policy-config.md). nodelay, sndbuf and rcvbuf are set once when the
// socket connects or is accepted; cork and coalesce take the socket's writes
// and keep what they hold in a process-wide set that reads, waits, the exit
// paths and a deadline thread release.
#ifndef TCPADVISE_POLICY_H_
#define TCPADVISE_POLICY_H_

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>

#include "config.h"
#include "socket_state.h"

namespace tcpadvise {

// g_policy_config is the loaded config, or nullptr when the shim only observes.
extern const PolicyConfig* g_policy_config;

// LoadPolicyConfig reads the file with libtcpadvise_config.so (found beside
// the shim); on any mistake it warns once and leaves the shim observing.
void LoadPolicyConfig(const char* path);

// SpinLock guards a policy's state: a write takes it for a memcpy, so an
// uncontended lock must cost next to nothing (a pthread mutex doubles the
// cost of a coalesced write); a waiter yields its CPU while the holder runs.
class SpinLock {
 public:
  void Lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) sched_yield();
    }
  }
  bool TryLock() { return !locked_.exchange(true, std::memory_order_acquire); }
  void Unlock() { locked_.store(false, std::memory_order_release); }
  // SpinLock::Reset frees the lock in a fork child, whoever held it in the parent.
  void Reset() { locked_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> locked_{false};
};

// PolicyState is the run-time state of a cork or coalesce policy on one live
// socket, guarded by its lock.
struct PolicyState {
  SpinLock lock;
  const PolicySettings* settings = nullptr;
  SocketState* socket = nullptr;
  // An open fd of the socket, for flushes that do not come from a call on it.
  std::atomic<int> fd{-1};
  bool in_held_set = false;
  // coalesce
  char* buffer = nullptr;
  uint32_t capacity = 0;
  std::atomic<uint32_t> held{0};
  uint64_t hold_start = 0;
  // A non-blocking socket is coalesced only while the kernel took the last
  // flush whole: the shim never holds more than the kernel would accept.
  bool nonblocking_ok = true;
  // The errno of a failed deferred flush, returned by the next write.
  int pending_errno = 0;
  // Writes made by a signal handler that interrupted its thread inside the
  // shim for this socket: a handler reserves overflow_length bytes, copies,
  // then adds them to overflow_ready; whoever holds the lock next sends them
  // once every reservation is copied.
  char* overflow = nullptr;
  std::atomic<uint32_t> overflow_length{0};
  std::atomic<uint32_t> overflow_ready{0};
  uint32_t overflow_drained = 0;  // under the lock: what was already taken
  // Set once the application shut the socket down for writing: its writes
  // go straight to the kernel, which refuses them as it should.
  std::atomic<bool> write_shutdown{false};
  // cork; corked is read without the lock by the writes that follow the first
  std::atomic<bool> corked{false};
  bool app_corks = false;
  uint64_t cork_start = 0;
};

// AttachPolicy chooses the socket's rule and applies nodelay, sndbuf and
// rcvbuf through fd; peer may be nullptr. The table mutex must be held.
void AttachPolicy(int fd, SocketState* s, const sockaddr* peer);

// PolicyWrite runs a write-family call on a socket whose policy takes writes.
// iov describes the application's bytes; passthrough performs the original
// call unchanged. Returns what the application must see, errno set likewise.
ssize_t PolicyWrite(SocketState* s, int fd, const iovec* iov, int iovcnt, int flags, bool special,
                    ssize_t (*passthrough)(void* context), void* context);

// ReleaseAll flushes or uncorks every socket that holds something, waiting
// for a blocking socket's buffer if need be; cheap when none holds anything.
void ReleaseAll(FlushCause cause);

// ReleaseSocket flushes or uncorks one socket, before it is closed, shut down
// or replaced: bytes are sent even if that means waiting (up to about 5 s on
// a peer that reads nothing).
void ReleaseSocket(SocketState* s, int fd, FlushCause cause);

// PolicySocketGone drops what a policy still holds once the table lets go of
// the socket's last fd: what the peer would not take in time (counted as a
// deferred ETIMEDOUT) is never sent into whatever reuses the fd number. The
// table mutex is held.
void PolicySocketGone(SocketState* s);

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

// DropHeldInChild forgets, in a fork child, the bytes the parent holds (the
// parent sends them) so they are never sent twice.
void DropHeldInChild();

// InsidePolicy tells whether this thread is inside policy code that holds a
// lock: a signal handler that interrupted it must not take policy locks.
bool InsidePolicy();

// AnyHeld reports whether any socket holds bytes or a cork: the one check
// reads and waits pay when nothing is held.
extern std::atomic<int> g_held_count;
inline bool AnyHeld() { return g_held_count.load(std::memory_order_relaxed) != 0; }

}  // namespace tcpadvise

#endif  // TCPADVISE_POLICY_H_
