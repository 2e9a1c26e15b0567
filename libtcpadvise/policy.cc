#include "policy.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>

#include "address.h"
#include "clock.h"
#include "coalesce.h"
#include "cork.h"
#include "deadline_thread.h"
#include "errno_saver.h"
#include "experiment.h"
#include "policy_load.h"
#include "private_alloc.h"
#include "raw_log.h"
#include "real_libc.h"
#include "reentry.h"
#include "runtime.h"
#include "socket_table.h"
#include "user_memory.h"

namespace tcpadvise {

__thread PolicyState* t_inside = nullptr;
__thread bool t_in_shared = false;
std::atomic<PolicyState*> g_section_forked{nullptr};
std::atomic<const char*> g_fail_open{nullptr};

namespace {

// kBoundedTurnTries bounds how long a close or an exit path waits for a
// socket's turn (about 100 ms): a turn held longer belongs to a writer
// blocked in the kernel, which sends the bytes itself.
constexpr int kBoundedTurnTries = 200;

// TakeTurnBounded takes p's turn, waiting at most about 100 ms.
bool TakeTurnBounded(PolicyState* p) {
  for (int spins = 0; spins < kBoundedTurnTries; ++spins) {
    if (TryTakeTurn(p)) return true;
    SocketTurn::Pause(spins);
  }
  return false;
}

// TakeWriterTurn takes p's turn for an application write on the socket,
// queueing behind another writer as the kernel would; a write that must
// not block gets false (then EAGAIN) when the holder may wait in the kernel.
bool TakeWriterTurn(PolicyState* p, bool nonblocking) {
  for (int spins = 0;; ++spins) {
    if (TryTakeTurn(p)) return true;
    if (nonblocking && p->lock.HolderMayBlock()) return false;
    SocketTurn::Pause(spins);
  }
}

void SetIntOption(int fd, int level, int name, int value) {
  Real(g_real.setsockopt)(fd, level, name, &value, sizeof(value));
}

// ConflictBit is option's kConflict* bit when the policy sets that option,
// else 0.
uint64_t ConflictBit(const PolicySettings& p, AppOption option) {
  if (option == AppOption::kNodelay && p.nodelay) return kConflictNodelay;
  if (option == AppOption::kCork && (p.cork || p.coalesce)) return kConflictCork;
  if (option == AppOption::kSndbuf && p.sndbuf) return kConflictSndbuf;
  if (option == AppOption::kRcvbuf && p.rcvbuf) return kConflictRcvbuf;
  return 0;
}

void AddConflict(SocketState* s, uint64_t bit) {
  PolicyCounters* c = s->stats.policy_counters();
  if (c == nullptr) return;  // only a socket a rule matched has them
  // No new bit, no write: PostgreSQL's postmaster sets TCP_NODELAY on each
  // connection after its fork, where a write copies a page the child shares.
  const uint64_t conflicts = c->conflicts.Get();
  if ((conflicts | bit) != conflicts) c->conflicts.Set(conflicts | bit);
}

// ApplyUnlessSet sets an option the policy sets, unless the application
// already did.
void ApplyUnlessSet(SocketState* s, int fd, const PolicySettings& settings, AppOption option, int level, int name,
                    int value) {
  const uint64_t bit = ConflictBit(settings, option);
  if (bit == 0) return;
  if (s->options_set_mask & (1u << static_cast<int>(option))) {
    AddConflict(s, bit);
    return;
  }
  SetIntOption(fd, level, name, value);
}

// DropHeld forgets what p holds, counting it as a deferred error_value.
void DropHeld(PolicyState* p, int error_value) {
  const bool had_bytes = p->held.load(std::memory_order_relaxed) != 0 ||
                         p->overflow_length.load(std::memory_order_relaxed) != p->overflow_drained;
  if (had_bytes) CountersOf(p).deferred_errors.Add(ErrnoSlot(error_value), 1);
  ForgetHeld(p);
  p->corked.store(false, std::memory_order_relaxed);
  RemoveFromHeldSet(p);
}

// ReleaseAllFor releases what every socket holds; exiting: the process or
// its image ends, so each socket's turn and room get a bounded wait.
void ReleaseAllFor(FlushCause cause, bool exiting) {
  ErrnoSaver errno_saver;
  PolicyState* copy[kMaxHeldSockets];
  const int n = CopyHeldSet(copy);
  for (int i = 0; i < n; ++i) {
    PolicyState* p = copy[i];
    if (!(exiting ? TakeTurnBounded(p) : TryTakeTurn(p))) continue;  // its holder sends it
    // Exit paths verify: a close the shim did not see may have given the fd to another file.
    ReleaseTaken(p, cause, /*verify=*/exiting, /*may_block=*/false, exiting);
    GiveTurn(p);
  }
}

// AdaptActs applies the adaptive rule (adapt.h) to an application write,
// counting per burst how it was treated; false: the write passes straight
// through. Never false while the socket holds bytes: they go first.
bool AdaptActs(PolicyState* p) {
  const PolicySettings& settings = *p->settings;
  const bool burst_start = p->socket->stats.burst_open_writes.Get() == 0;
  bool switched;
  const AdaptDecision decision =
      AdaptWrite(&p->shape, burst_start, settings.adapt_enter_bursts, settings.adapt_leave_bursts, &switched);
  PolicyCounters& c = CountersOf(p);
  if (switched) c.adapt_switches.Increment();
  if (p->shape.burst_writes == 1) {
    (decision == AdaptDecision::kAct ? c.bursts_held : c.bursts_passed).Increment();
  } else if (p->shape.burst_writes == 2 && !p->shape.active) {
    c.bursts_pieces.Increment();
  }
  return decision == AdaptDecision::kAct || HoldsSomething(p);
}

}  // namespace

uint64_t TicksFromUs(uint64_t us) {
  return static_cast<uint64_t>(static_cast<double>(us) * g_runtime.tick_rate.TicksPerSecond() / 1e6);
}

void NoteReleased(PolicyState* p, FlushCause cause, uint64_t since) {
  PolicyCounters& c = CountersOf(p);
  c.flushes[static_cast<int>(cause)].Increment();
  const uint64_t now = ReadTicks();
  p->socket->MarkSent(now);
  const uint64_t held_for = now - since;
  if (held_for > c.longest_hold_ticks.Get()) c.longest_hold_ticks.Set(held_for);
}

bool SameSocket(PolicyState* p, int fd) {
  if (p->cookie == 0) return true;
  ErrnoSaver errno_saver;
  return SocketCookie(fd) == p->cookie;
}

void MarkGone(PolicyState* p) {
  DropHeld(p, EBADF);
  p->gone.store(true, std::memory_order_relaxed);
}

bool TryTakeTurn(PolicyState* p) {
  // t_inside first: a signal handler that comes between taking the turn and
  // noting it must not wait for the turn this thread holds.
  t_inside = p;
  if (!p->lock.TryTake()) {
    t_inside = nullptr;
    return false;
  }
  if (__builtin_expect(p->overflow_length.load(std::memory_order_acquire) != p->overflow_drained, 0)) {
    ErrnoSaver errno_saver;
    DrainOverflowSlow(p);
  }
  return true;
}

namespace {

// PublishesPass tells whether a burst's first write on p's socket may pass
// without the turn (PassesUnheld): the policy is adaptive (a fixed cork's
// Uncork writes the shape too), the shape is steady and nothing is held,
// corked, left by a signal handler, gone or turned off. p's turn is held. A
// pass given before the policy turned off stays: such a write passes
// through unchanged either way.
bool PublishesPass(const PolicyState* p) {
  // Held bytes first: a coalesced burst's held writes give the turn back
  // most, and stop at the first test.
  return !HoldsSomething(p) && AdaptSteady(p->shape) && p->settings->adaptive &&
         p->overflow_length.load(std::memory_order_relaxed) == 0 && !p->gone.load(std::memory_order_relaxed) &&
         !PolicyOff();
}

}  // namespace

void GiveTurn(PolicyState* p) {
  if (HoldsParentsBytes(p)) {
    // The end of the section a fork from a signal handler cut: whatever it
    // held or was given, this child's parent sends.
    ForgetHeld(p);
    RemoveFromHeldSet(p);
    g_section_forked.store(nullptr, std::memory_order_relaxed);
  }
  for (;;) {
    if (__builtin_expect(p->overflow_length.load(std::memory_order_acquire) != p->overflow_drained, 0)) {
      ErrnoSaver errno_saver;
      DrainOverflowSlow(p);
    }
    if (p->orphaned.load(std::memory_order_relaxed)) DropHeld(p, EBADF);
    const uint32_t drained = p->overflow_drained;  // the turn's: read before giving it
    p->lock.Give(PublishesPass(p));
    t_inside = nullptr;
    // A handler that came after the drain queued behind us (t_inside was
    // still p); one that comes from here on finds the turn free and takes it.
    if (p->overflow_length.load(std::memory_order_acquire) == drained) break;
    if (!TryTakeTurn(p)) break;  // whoever took it sends them
  }
  if (__builtin_expect(t_pending_signal != 0, 0)) RunPendingSignal();
}

bool InsidePolicy() { return InterruptedShim(); }

void ReleaseTaken(PolicyState* p, FlushCause cause, bool verify, bool may_block, bool exiting) {
  const int fd = p->fd.load(std::memory_order_relaxed);
  if (fd < 0 || !HoldsSomething(p)) {
    RemoveFromHeldSet(p);
    return;
  }
  if (p->gone.load(std::memory_order_relaxed) || p->orphaned.load(std::memory_order_relaxed) ||
      (verify && !SameSocket(p, fd))) {
    MarkGone(p);
    return;
  }
  if (p->corked.load(std::memory_order_relaxed)) Uncork(p, fd, cause);
  do {
    DrainOverflow(p);
    if (p->held.load(std::memory_order_relaxed) == 0) continue;
    if (exiting) {
      FlushForExit(p, fd, cause);
    } else if (!Flush(p, fd, cause, may_block && !p->socket->nonblocking.load(std::memory_order_relaxed))) {
      break;  // the kernel has no room: the deadline thread tries again
    }
  } while (p->overflow_length.load(std::memory_order_acquire) != p->overflow_drained &&
           p->overflow_ready.load(std::memory_order_acquire) == p->overflow_length.load(std::memory_order_acquire));
  if (!HoldsSomething(p)) RemoveFromHeldSet(p);
}

void PolicyFailOpen(const char* reason) {
  const char* expected = nullptr;
  if (!g_fail_open.compare_exchange_strong(expected, reason, std::memory_order_acq_rel)) return;
  RawWarning("%s: cork and coalesce are off for the rest of this process; its data passes through unchanged",
             reason);
  if (AnyHeld() && !InterruptedShim()) ReleaseAllFor(FlushCause::kPassthrough, false);
}

const char* PolicyFailOpenReason() {
  const char* reason = g_fail_open.load(std::memory_order_relaxed);
  if (reason == nullptr && g_config_problem) return "the policy config could not be used";
  return reason;
}

void AttachPolicy(int fd, SocketState* s, const sockaddr* peer) {
  if (g_policy_config == nullptr) return;
  MatchInput in;
  in.program = g_runtime.program;
  in.role = s->id.role == Role::kClient ? 1 : s->id.role == Role::kServer ? 2 : 0;
  in.local_port = PortOf(s->id.local);
  in.peer = peer;
  const ExperimentConfig& experiment = g_policy_config->experiment;
  int rule;
  if (experiment.enabled && Matches(experiment.match, in)) {
    // An arm is drawn from the connection's 4-tuple: a client's is known
    // once connect has picked its port, and Connect calls again then.
    s->experiment_draw_pending = s->id.role == Role::kClient && !s->experiment_draw_pending;
    if (s->experiment_draw_pending) return;
    rule = experiment.arms[DrawArm(experiment, s->id.local, s->id.peer)].rule;
  } else {
    rule = MatchRule(*g_policy_config, in);
  }
  // A rule's socket counts what the policy did; without memory for that it
  // runs under no rule.
  if (rule >= 0 && s->stats.MakePolicyCounters() == nullptr) {
    PolicyFailOpen("out of memory for a policy's counters");
    rule = -1;
  }
  s->id.rule = static_cast<int16_t>(rule);
  if (rule < 0) return;
  const PolicySettings& settings = g_policy_config->rules[rule].settings;
  ErrnoSaver errno_saver;
  // An option the application set before the rule was chosen stays its own.
  ApplyUnlessSet(s, fd, settings, AppOption::kNodelay, IPPROTO_TCP, TCP_NODELAY, 1);
  ApplyUnlessSet(s, fd, settings, AppOption::kSndbuf, SOL_SOCKET, SO_SNDBUF, settings.sndbuf);
  ApplyUnlessSet(s, fd, settings, AppOption::kRcvbuf, SOL_SOCKET, SO_RCVBUF, settings.rcvbuf);
  if ((!settings.cork && !settings.coalesce) || PolicyOff()) return;
  if (s->policy_state == nullptr) s->policy_state = PrivateNew<PolicyState>();
  PolicyState* p = s->policy_state;
  if (p == nullptr) {
    PolicyFailOpen("out of memory for a policy's state");
    return;
  }
  // A reused state is out of the held set, unless a fork cut its removal
  // in another thread (a fork from inside the shim): it still reads in,
  // and its new socket's bytes would never be released but by its own calls.
  if (p->in_held_set) RemoveFromHeldSet(p);
  p->settings = &settings;
  p->socket = s;
  p->fd.store(fd, std::memory_order_relaxed);
  p->cookie = s->id.cookie;  // read when the socket was tracked: no second getsockopt
  p->gone.store(false, std::memory_order_relaxed);
  ForgetHeld(p);
  p->write_shutdown.store(false, std::memory_order_relaxed);
  p->nonblocking_ok = true;
  p->pending_errno = 0;
  p->corked.store(false, std::memory_order_relaxed);
  p->app_corks = false;
  p->shape = AdaptiveShape();
  p->passed.Set(0);
  p->lock.Veto();  // a reused state's pass was its last socket's
  if (p->capacity != 0 && settings.coalesce_max_bytes != 0 && p->capacity != settings.coalesce_max_bytes) {
    FreeBuffers(p);
  }
  s->stats.policy = p;
}

ssize_t PolicyWrite(SocketState* s, int fd, const iovec* iov, int iovcnt, bool app_iov, int flags, bool special,
                    ssize_t (*passthrough)(void*), void* context) {
  PolicyState* p = s->stats.policy;
  // The writes after a burst's first find the socket corked: nothing to do.
  if (p->corked.load(std::memory_order_relaxed)) return passthrough(context);
  if (InterruptedShim()) {
    // A signal handler that interrupted its thread inside the shim: its
    // bytes queue behind what the socket holds (that socket is in the held
    // set, so a release or the deadline thread sends them); a socket that
    // holds nothing takes them directly, as does one whose held bytes are a
    // fork child's parent's (nothing of the child's is behind them).
    const bool behind = t_inside == p || p->held.load(std::memory_order_relaxed) != 0 ||
                        p->overflow_length.load(std::memory_order_acquire) != 0;
    if (!p->settings->coalesce || !behind || HoldsParentsBytes(p) || iovcnt <= 0 || iovcnt > kMaxHeldIovecs) {
      return passthrough(context);
    }
    iovec local[kMaxHeldIovecs];
    if (app_iov && !CopyFromApp(local, iov, sizeof(iovec) * static_cast<size_t>(iovcnt))) return passthrough(context);
    return SignalWrite(p, app_iov ? local : iov, iovcnt, passthrough, context);
  }
  if (__builtin_expect(PolicyOff() || p->gone.load(std::memory_order_relaxed), 0)) {
    if (HoldsSomething(p)) ReleaseSocket(s, fd, FlushCause::kPassthrough);
    return passthrough(context);
  }
  const bool nonblocking = s->nonblocking.load(std::memory_order_relaxed) || (flags & MSG_DONTWAIT) != 0;
  if (!TakeWriterTurn(p, nonblocking)) {
    errno = EAGAIN;
    return -1;
  }
  p->fd.store(fd, std::memory_order_relaxed);
  // A write the adaptive rule lets through costs the turn and the rule: no
  // copy of its iovecs, and no deadline thread in a process (a forked
  // backend, say) whose sockets only ever write once a burst.
  if (p->settings->adaptive && !AdaptActs(p)) {
    GiveTurn(p);  // keeps errno
    return passthrough(context);
  }
  if (__builtin_expect(!DeadlineThreadRunning(), 0)) {
    // The first write the policy acts on starts the thread, with no turn
    // held (a failure to start releases every socket); the write is then
    // acted on as the rule decided.
    GiveTurn(p);
    if (!EnsureDeadlineThread()) {
      if (HoldsSomething(p)) ReleaseSocket(s, fd, FlushCause::kPassthrough);
      return passthrough(context);
    }
    if (!TakeWriterTurn(p, nonblocking)) {
      errno = EAGAIN;
      return -1;
    }
    p->fd.store(fd, std::memory_order_relaxed);
  }
  // The iovecs of writev and sendmsg are the application's: read safely.
  iovec local[kMaxHeldIovecs];
  if (app_iov && iovcnt > 0) {
    if (iovcnt > kMaxHeldIovecs || !CopyFromApp(local, iov, sizeof(iovec) * static_cast<size_t>(iovcnt))) {
      special = true;
      iovcnt = 0;
    }
    iov = local;
  }
  ssize_t result;
  if (p->settings->coalesce) {
    // One buffer (write, send) is the common small write: held inline.
    if (!special && iovcnt == 1 && HeldNow(p, iov, 1, iov[0].iov_len, nonblocking)) {
      ReleaseIfFull(p, fd, nonblocking);
      GiveTurn(p);  // keeps errno
      return static_cast<ssize_t>(iov[0].iov_len);
    }
    result = CoalesceWrite(p, fd, iov, iovcnt, flags, special, passthrough, context);
    ErrnoSaver errno_saver;
    GiveTurn(p);
  } else {
    StartCork(p, fd);
    {
      ErrnoSaver errno_saver;
      GiveTurn(p);
    }
    // Corked bytes wait in the kernel: the write itself needs no turn.
    result = passthrough(context);
  }
  return result;
}

void ReleaseHeld(FlushCause cause) {
  if (InterruptedShim()) return;  // a signal handler: the interrupted call finishes the job
  ReleaseAllFor(cause, cause == FlushCause::kExit || cause == FlushCause::kExec || cause == FlushCause::kFork);
}

void ReleaseSocket(SocketState* s, int fd, FlushCause cause) {
  PolicyState* p = s->stats.policy;
  if (p == nullptr || InterruptedShim() || !TakeTurnBounded(p)) return;
  ErrnoSaver errno_saver;
  p->fd.store(fd, std::memory_order_relaxed);
  ReleaseTaken(p, cause, /*verify=*/false, /*may_block=*/true, /*exiting=*/true);
  GiveTurn(p);
}

void PolicySocketGone(SocketState* s, int error_value) {
  PolicyState* p = s->stats.policy;
  if (p == nullptr) return;
  // The passes counted beside the turn join the socket's counters, which
  // its group folds (none pass once the table let go: no write finds it).
  if (PolicyCounters* c = s->stats.policy_counters()) c->bursts_passed.Add(p->passed.Get());
  p->passed.Set(0);
  ErrnoSaver errno_saver;
  if (InterruptedShim() || !TryTakeTurn(p)) {
    // A writer holds the turn, blocked in the kernel: it keeps this state,
    // drops what is held when it lets go (GiveTurn), and the entry gets a
    // new state if it carries a policy again.
    p->orphaned.store(true, std::memory_order_relaxed);
    s->policy_state = nullptr;
    s->stats.policy = nullptr;
    return;
  }
  DropHeld(p, error_value);
  p->fd.store(-1, std::memory_order_relaxed);
  GiveTurn(p);
}

void PolicyBeforeBypass(int fd, bool bypass) {
  SocketState* s = g_table.Lookup(fd);
  if (s == nullptr || s->stats.policy == nullptr) return;
  ReleaseSocket(s, fd, FlushCause::kPassthrough);
  if (bypass) {
    PolicyState* p = s->stats.policy;
    p->gone.store(true, std::memory_order_relaxed);
    p->lock.Veto();  // gone without the turn: the writes take PolicyWrite's passthrough
  }
}

void PolicyForgetClosedFd(int fd) {
  if (g_table.Lookup(fd) == nullptr) return;
  ErrnoSaver errno_saver;
  g_table.ForgetStale(fd);
}

void OnShutdown(SocketState* s, int how) {
  PolicyState* p = s->stats.policy;
  if (p != nullptr && how != SHUT_RD) p->write_shutdown.store(true, std::memory_order_relaxed);
}

void OnApplicationCork(SocketState* s, int fd) {
  if (s == nullptr) return;  // closed by another thread meanwhile
  PolicyState* p = s->stats.policy;
  if (p == nullptr || !p->settings->cork || InterruptedShim()) return;
  t_inside = p;
  p->lock.Take();
  // The application's own setting has already reached the kernel: it wins.
  p->app_corks = true;
  p->corked.store(false, std::memory_order_relaxed);
  p->fd.store(fd, std::memory_order_relaxed);
  RemoveFromHeldSet(p);
  GiveTurn(p);
}

void NoteConflict(SocketState* s, AppOption option) {
  if (s->id.rule >= 0 && g_policy_config != nullptr) {
    AddConflict(s, ConflictBit(g_policy_config->rules[s->id.rule].settings, option));
  }
}

void AfterReadPolicy(SocketState* s, int fd) {
  if (s->id.rule < 0 || !g_policy_config->rules[s->id.rule].settings.quickack) return;
  ErrnoSaver errno_saver;
  SetIntOption(fd, IPPROTO_TCP, TCP_QUICKACK, 1);
}

void ResetPolicyInChild(PolicyState* p) {
  p->lock.Reset();
  p->passed.Set(0);  // the child's counts start from zero (SocketTable::ResetInChild)
  t_inside = nullptr;
  t_in_shared = false;
}

void FreeTurnInChild(PolicyState* p) {
  if (p != nullptr) p->lock.Reset();
}

void PolicyFdClosed(SocketState* s, int closed_fd, int other_fd) {
  PolicyState* p = s->policy_state;
  if (p == nullptr) return;
  int expected = closed_fd;
  p->fd.compare_exchange_strong(expected, other_fd, std::memory_order_relaxed);
}

void DropHeldInChild(pid_t forking_tid) {
  // The socket whose turn an interrupted section holds is that section's
  // until it ends: its lengths must not change under it.
  if (t_inside != nullptr) g_section_forked.store(t_inside, std::memory_order_relaxed);
  ClearHeldSetInChild([](PolicyState* p) {
    if (p != t_inside) ForgetHeld(p);
  }, forking_tid);
  ResetDeadlineThreadInChild();
}

}  // namespace tcpadvise
