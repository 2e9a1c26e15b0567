// PolicyState: the run-time state of a cork or coalesce policy on one live
// socket, and the per-socket turn that orders what reaches its kernel socket.
//
// A socket's turn (PolicyState::lock) is taken by whoever touches the held
// bytes or sends on the socket's behalf. Only the application's own writes
// on that socket ever wait for it, and they wait without spinning, as they
// would wait in the kernel behind a write blocked on a full buffer. Every
// other caller (reads, waits, fork, exit, close and the deadline thread)
// only tries: a socket whose turn is taken is being sent by its holder.
// Flushes made on another call's behalf never block in the kernel.
#ifndef TCPADVISE_POLICY_STATE_H_
#define TCPADVISE_POLICY_STATE_H_

#include <sched.h>
#include <stdint.h>
#include <time.h>

#include <atomic>

#include "adapt.h"
#include "config.h"
#include "socket_state.h"

namespace tcpadvise {

// SocketTurn is a socket's turn: TryTake never waits; Take waits, yielding
// at first, then sleeping, so a writer queued behind a blocked one costs no
// CPU. blocking_ tells a waiter that cannot block (a non-blocking write)
// whether the holder may stay in the kernel for long.
//
// The turn's word also carries what its last holder published for the
// writes that take no turn (policy.h: PassesUnheld): kPasses, given with the
// turn (Give), says a burst's first write may pass straight, so that write
// tests one word. Taking the turn clears it in the same step; Veto clears
// it from outside the turn (a signal handler's write, a bypass), and wins
// over a Give that comes after it.
class SocketTurn {
 public:
  bool TryTake() {
    uint8_t word = word_.load(std::memory_order_relaxed);
    do {
      if (word & kTaken) return false;
    } while (!word_.compare_exchange_weak(word, kTaken, std::memory_order_acquire, std::memory_order_relaxed));
    return true;
  }
  void Take() {
    for (int spins = 0; !TryTake(); ++spins) Pause(spins);
  }
  // SocketTurn::Give gives the turn back; passes: publish kPasses, unless a
  // Veto came while the turn was held. Release: a write that sees kPasses
  // sees all the holder did, the kernel's taking the held bytes included.
  void Give(bool passes = false) {
    blocking_.store(false, std::memory_order_relaxed);
    uint8_t taken = kTaken;
    if (passes && word_.compare_exchange_strong(taken, kPasses, std::memory_order_release, std::memory_order_relaxed)) {
      return;
    }
    word_.store(0, std::memory_order_release);
  }
  // SocketTurn::Veto withdraws a published pass (and one a holder is about to give).
  void Veto() { word_.fetch_or(kVetoed, std::memory_order_acq_rel); }
  // SocketTurn::Passes tells whether the turn is free with a pass published.
  bool Passes() const { return word_.load(std::memory_order_acquire) == kPasses; }
  // SocketTurn::SetBlocking marks the holder as about to wait in the kernel.
  void SetBlocking(bool blocking) { blocking_.store(blocking, std::memory_order_relaxed); }
  bool HolderMayBlock() const { return blocking_.load(std::memory_order_relaxed); }
  // SocketTurn::Reset frees the turn in a fork child, whoever held it; no pass.
  void Reset() {
    word_.store(0, std::memory_order_relaxed);
    blocking_.store(false, std::memory_order_relaxed);
  }
  // SocketTurn::Pause waits a little more each time: 64 yields, then sleeps
  // from 20 us up to 1 ms.
  static void Pause(int spins) {
    if (spins < 64) {
      sched_yield();
      return;
    }
    const long us = spins < 96 ? 20 : spins < 160 ? 200 : 1000;
    const timespec t = {0, us * 1000};
    nanosleep(&t, nullptr);
  }

 private:
  static constexpr uint8_t kTaken = 1, kPasses = 2, kVetoed = 4;
  std::atomic<uint8_t> word_{0};
  std::atomic<bool> blocking_{false};
};

// PolicyState is guarded by its turn, except the atomics.
struct PolicyState {
  SocketTurn lock;
  // The bursts PassesUnheld let through, counted beside the turn word it
  // has just read (no second cache line, no pointer to the counters); the
  // trace adds them to PolicyCounters::bursts_passed (BurstsPassed), where
  // PolicySocketGone moves them when the socket goes.
  Counter passed;
  const PolicySettings* settings = nullptr;
  SocketState* socket = nullptr;
  // An open fd of the socket, for flushes that do not come from a call on it.
  std::atomic<int> fd{-1};
  // The socket's SO_COOKIE (0: unknown). A flush on another call's behalf,
  // and a write that starts holding, first check that fd still refers to
  // this socket: the application may have closed it behind the shim's back
  // (syscall(SYS_close), fclose, closefrom) and reused the number.
  uint64_t cookie = 0;
  // Set once the socket is known gone behind the shim's back: nothing is
  // held any more and writes pass through.
  std::atomic<bool> gone{false};
  // Set when the table dropped the socket while a blocked writer held its
  // turn: the state is no longer the entry's and is never reused.
  std::atomic<bool> orphaned{false};
  bool in_held_set = false;
  // The adaptive rule's view of the socket (adapt.h), under the turn;
  // whether it lets writes pass without the turn is published with the
  // turn (GiveTurn, SocketTurn::Give). Never learnt under a fixed policy.
  AdaptiveShape shape;
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
  // then adds them to overflow_ready; whoever holds the turn next sends them
  // once every reservation is copied.
  char* overflow = nullptr;
  std::atomic<uint32_t> overflow_length{0};
  std::atomic<uint32_t> overflow_ready{0};
  uint32_t overflow_drained = 0;  // under the turn: what was already taken
  // Set once the application shut the socket down for writing: its writes
  // go straight to the kernel, which refuses them as it should.
  std::atomic<bool> write_shutdown{false};
  // cork; corked is read without the turn by the writes that follow the first
  std::atomic<bool> corked{false};
  bool app_corks = false;
  uint64_t cork_start = 0;
};
static_assert(sizeof(PolicyState) <= 128, "PolicyState outgrew the size class the heap warms (private_alloc.cc)");

// CountersOf is p's socket's policy counters, allocated before the policy
// was attached (AttachPolicy) and never freed.
inline PolicyCounters& CountersOf(PolicyState* p) { return *p->socket->stats.policy_counters(); }

// BurstsPassed is the bursts s's policy passed: its counters' and, while
// the socket lives, what its state counted since (PolicyState::passed).
inline uint64_t BurstsPassed(const SocketState& s) {
  const PolicyCounters* c = s.stats.policy_counters();
  return (c != nullptr ? c->bursts_passed.Get() : 0) + (s.stats.policy != nullptr ? s.stats.policy->passed.Get() : 0);
}

// HoldsSomething tells whether p holds bytes or a cork.
inline bool HoldsSomething(const PolicyState* p) {
  return p->held.load(std::memory_order_relaxed) != 0 || p->corked.load(std::memory_order_relaxed);
}

// t_inside is the policy state whose turn this thread holds, t_in_shared set
// while it holds a lock shared by all sockets: a hook entered while either is
// set can only be a signal handler that interrupted the shim, and must not
// wait for what this thread already holds.
extern __thread PolicyState* t_inside;
extern __thread bool t_in_shared;
inline bool InterruptedShim() { return t_inside != nullptr || t_in_shared; }

// g_section_forked is, in the child of a fork made from a signal handler
// that interrupted a section holding a socket's turn (runtime.cc:
// t_fork_inside_shim), that socket's state; else null. What the state holds
// when the section goes on in the child, and what the section adds (the
// interrupted write's bytes, as if its call had reached the kernel before
// the fork), is its parent's to send: the child's section sends none of it
// (Flush, SendHeldThen, DrainOverflowSlow) and forgets it when it gives the
// turn back (GiveTurn); a signal handler's write in the child meanwhile
// goes straight to the kernel (PolicyWrite). The other sockets' held bytes
// the fork forgot at once (DropHeldInChild); this one's the section is using.
extern std::atomic<PolicyState*> g_section_forked;
inline bool HoldsParentsBytes(const PolicyState* p) {
  return __builtin_expect(p == g_section_forked.load(std::memory_order_relaxed), 0);
}

// ForgetHeld forgets what p holds, its signal handlers' bytes included,
// without counting them: someone else sends them. p's turn is held, or no
// section is using p. Inline: a fork child runs it (DropHeldInChild).
inline void ForgetHeld(PolicyState* p) {
  p->held.store(0, std::memory_order_relaxed);
  p->overflow_length.store(0, std::memory_order_relaxed);
  p->overflow_ready.store(0, std::memory_order_relaxed);
  p->overflow_drained = 0;
}

// TicksFromUs converts microseconds to clock ticks.
uint64_t TicksFromUs(uint64_t us);

// NoteReleased counts a flush or an uncork of what was held since `since`
// (ticks); the bytes reach the kernel now (the turn keeps its start).
void NoteReleased(PolicyState* p, FlushCause cause, uint64_t since);

// SameSocket tells whether fd still refers to p's socket (SO_COOKIE); true
// when the cookie is unknown. Keeps errno.
bool SameSocket(PolicyState* p, int fd);

// MarkGone drops what p holds for a socket closed behind the shim's back:
// those bytes can no longer reach their peer, and never go into whatever
// now has the fd number. Counted as a deferred EBADF. p's turn is held.
void MarkGone(PolicyState* p);

}  // namespace tcpadvise

#endif  // TCPADVISE_POLICY_STATE_H_
