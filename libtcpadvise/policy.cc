#include "policy.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "address.h"
#include "background_thread.h"
#include "clock.h"
#include "errno_saver.h"
#include "experiment.h"
#include "private_alloc.h"
#include "raw_log.h"
#include "real_libc.h"
#include "runtime.h"

namespace tcpadvise {

const PolicyConfig* g_policy_config = nullptr;
std::atomic<int> g_held_count{0};

namespace {

// The held set: sockets holding bytes or a cork. Lock order: a socket's
// lock, then g_set_lock; ReleaseAll copies the set and lets go of g_set_lock
// before it takes any socket's lock.
constexpr int kMaxHeldSockets = 4096;
pthread_mutex_t g_set_lock = PTHREAD_MUTEX_INITIALIZER;
PolicyState* g_held_set[kMaxHeldSockets];
int g_held_set_size = 0;

// The deadline thread sleeps on g_flusher_wake while nothing is held.
pthread_mutex_t g_flusher_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_flusher_wake = PTHREAD_COND_INITIALIZER;
std::atomic<bool> g_flusher_started{false};
std::atomic<bool> g_flusher_idle{false};

// t_inside is the policy state this thread is working on, t_in_shared set
// while it holds a lock shared by all sockets: a hook entered while either is
// set can only be a signal handler that interrupted the shim, and must not
// take a lock this thread already holds.
thread_local PolicyState* t_inside = nullptr;
thread_local bool t_in_shared = false;

bool InterruptedShim() { return t_inside != nullptr || t_in_shared; }

void LockShared(pthread_mutex_t* m) {
  t_in_shared = true;
  pthread_mutex_lock(m);
}

void UnlockShared(pthread_mutex_t* m) {
  pthread_mutex_unlock(m);
  t_in_shared = false;
}

// kOverflowCapacity bounds what signal handlers may write while their thread
// is inside the shim for the same socket; beyond it they write directly.
constexpr uint32_t kOverflowCapacity = 65536;

uint64_t TicksFromUs(uint64_t us) {
  return static_cast<uint64_t>(static_cast<double>(us) * g_runtime.tick_rate.TicksPerSecond() / 1e6);
}

uint64_t Earliest(uint64_t a, uint64_t b) { return a < b ? a : b; }

size_t IovecBytes(const iovec* iov, int iovcnt) {
  size_t n = 0;
  for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
  return n;
}

PolicyCounters& CountersOf(PolicyState* p) { return p->socket->stats.policy_counters; }

// ---- the held set ----

void StartFlusher();

// HeldSetHasRoom tells whether a socket that holds nothing yet may start
// holding: a socket outside the set would never be released.
bool HeldSetHasRoom(const PolicyState* p) {
  return p->in_held_set || g_held_count.load(std::memory_order_relaxed) < kMaxHeldSockets;
}

void AddToHeldSet(PolicyState* p) {
  if (p->in_held_set) return;
  LockShared(&g_set_lock);
  if (g_held_set_size < kMaxHeldSockets) {
    g_held_set[g_held_set_size++] = p;
    p->in_held_set = true;
    g_held_count.fetch_add(1, std::memory_order_relaxed);
  }
  UnlockShared(&g_set_lock);
  if (!g_flusher_started.load(std::memory_order_relaxed)) StartFlusher();
  if (g_flusher_idle.load(std::memory_order_relaxed)) {
    LockShared(&g_flusher_mutex);
    pthread_cond_signal(&g_flusher_wake);
    UnlockShared(&g_flusher_mutex);
  }
}

void RemoveFromHeldSet(PolicyState* p) {
  if (!p->in_held_set) return;
  LockShared(&g_set_lock);
  for (int i = 0; i < g_held_set_size; ++i) {
    if (g_held_set[i] == p) {
      g_held_set[i] = g_held_set[--g_held_set_size];
      g_held_count.fetch_sub(1, std::memory_order_relaxed);
      break;
    }
  }
  p->in_held_set = false;
  UnlockShared(&g_set_lock);
}

bool HoldsSomething(const PolicyState* p) {
  return p->held.load(std::memory_order_relaxed) != 0 || p->corked.load(std::memory_order_relaxed);
}

// ---- locking ----

void DrainOverflow(PolicyState* p);

// Enter locks p for this thread; false when this thread is already inside
// the shim's policy code (a signal handler), in which case nothing is locked.
// What handlers wrote before goes first.
bool Enter(PolicyState* p) {
  if (InterruptedShim()) return false;
  t_inside = p;
  p->lock.Lock();
  DrainOverflow(p);
  return true;
}

// Leave unlocks p after sending what signal handlers wrote meanwhile; a
// handler that writes after the last look is drained by the next Enter.
void Leave(PolicyState* p) {
  for (;;) {
    DrainOverflow(p);
    p->lock.Unlock();
    t_inside = nullptr;
    // A handler that came after the drain queued behind us (t_inside was
    // still p); one that comes from here on finds the lock free and takes it.
    if (p->overflow_length.load(std::memory_order_acquire) == p->overflow_drained) break;
    t_inside = p;
    p->lock.Lock();
  }
}

// ---- coalesce ----

bool EnsureBuffer(PolicyState* p, int fd) {
  if (p->buffer != nullptr) return true;
  uint32_t capacity = p->settings->coalesce_max_bytes;
  if (capacity == 0) {
    int mss = 0;
    socklen_t len = sizeof(mss);
    capacity = getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) == 0 && mss > 0 ? static_cast<uint32_t>(mss) : 1448;
  }
  p->buffer = static_cast<char*>(PrivateAlloc(capacity));
  p->overflow = static_cast<char*>(PrivateAlloc(kOverflowCapacity));
  if (p->buffer == nullptr || p->overflow == nullptr) {
    PrivateFree(p->buffer);
    PrivateFree(p->overflow);
    p->buffer = p->overflow = nullptr;
    return false;
  }
  p->capacity = capacity;
  return true;
}

void SetIntOption(int fd, int level, int name, int value) {
  Real(g_real.setsockopt)(fd, level, name, &value, sizeof(value));
}

// NoteReleased counts a flush or an uncork of what was held since `since`
// (ticks); the turn starts now, when the bytes leave.
void NoteReleased(PolicyState* p, FlushCause cause, uint64_t since) {
  PolicyCounters& c = CountersOf(p);
  c.flushes[static_cast<int>(cause)].Increment();
  const uint64_t now = ReadTicks();
  p->socket->StartTurnAt(now);
  const uint64_t held_for = now - since;
  if (held_for > c.longest_hold_ticks.Get()) c.longest_hold_ticks.Set(held_for);
}

void NoteHoldEnded(PolicyState* p, FlushCause cause) { NoteReleased(p, cause, p->hold_start); }

void Append(PolicyState* p, const iovec* iov, int iovcnt) {
  uint32_t held = p->held.load(std::memory_order_relaxed);
  if (held == 0) p->hold_start = ReadTicks();
  for (int i = 0; i < iovcnt; ++i) {
    memcpy(p->buffer + held, iov[i].iov_base, iov[i].iov_len);
    held += static_cast<uint32_t>(iov[i].iov_len);
  }
  p->held.store(held, std::memory_order_relaxed);
  PolicyCounters& c = CountersOf(p);
  c.bytes_held.Add(IovecBytes(iov, iovcnt));
  if (held > c.max_bytes_held.Get()) c.max_bytes_held.Set(held);
  AddToHeldSet(p);
}

void Consume(PolicyState* p, size_t sent) {
  const uint32_t held = p->held.load(std::memory_order_relaxed);
  memmove(p->buffer, p->buffer + sent, held - sent);
  p->held.store(held - static_cast<uint32_t>(sent), std::memory_order_relaxed);
}

// SendHeldThen sends the held bytes followed by the application's in one
// sendmsg, looping on a blocking socket until the held part is out. Returns
// the application's bytes sent, or -1 with errno.
ssize_t SendHeldThen(PolicyState* p, int fd, const iovec* iov, int iovcnt, int flags, bool nonblocking) {
  iovec parts[IOV_MAX];
  const size_t app_bytes = IovecBytes(iov, iovcnt);
  for (;;) {
    const uint32_t held = p->held.load(std::memory_order_relaxed);
    parts[0] = {p->buffer, held};
    memcpy(parts + 1, iov, sizeof(iovec) * static_cast<size_t>(iovcnt));
    msghdr msg{};
    msg.msg_iov = held ? parts : parts + 1;
    msg.msg_iovlen = static_cast<size_t>(iovcnt) + (held ? 1 : 0);
    const ssize_t sent = LibcSendmsg(fd, &msg, flags | (nonblocking ? MSG_DONTWAIT : 0));
    if (sent < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) p->nonblocking_ok = false;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && held != 0) {
        // The connection is gone: the held bytes go with it, and this call reports why.
        CountersOf(p).deferred_errors.Add(ErrnoSlot(errno), 1);
        NoteHoldEnded(p, FlushCause::kLimit);
        p->held.store(0, std::memory_order_relaxed);
      }
      return -1;
    }
    if (static_cast<size_t>(sent) >= held) {
      if (held != 0) NoteHoldEnded(p, FlushCause::kLimit);
      p->held.store(0, std::memory_order_relaxed);
      p->nonblocking_ok = static_cast<size_t>(sent) - held == app_bytes;
      const ssize_t app_sent = sent - static_cast<ssize_t>(held);
      if (app_sent == 0 && app_bytes != 0) {
        errno = EAGAIN;
        return -1;
      }
      return app_sent;
    }
    Consume(p, static_cast<size_t>(sent));
    if (nonblocking) {
      p->nonblocking_ok = false;
      errno = EAGAIN;
      return -1;
    }
  }
}

// Flush sends what p holds without a SIGPIPE; on a socket that must not
// block it sends what the kernel takes and keeps the rest for later. An error
// other than EAGAIN drops the bytes and is kept for the socket's next write.
bool Flush(PolicyState* p, int fd, FlushCause cause, bool may_block) {
  while (p->held.load(std::memory_order_relaxed) != 0) {
    const uint32_t held = p->held.load(std::memory_order_relaxed);
    const ssize_t sent = LibcSend(fd, p->buffer, held, MSG_NOSIGNAL | (may_block ? 0 : MSG_DONTWAIT));
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        p->nonblocking_ok = false;
        return false;
      }
      CountersOf(p).deferred_errors.Add(ErrnoSlot(errno), 1);
      p->pending_errno = errno;
      NoteHoldEnded(p, cause);
      p->held.store(0, std::memory_order_relaxed);
      return true;
    }
    if (static_cast<uint32_t>(sent) == held) {
      NoteHoldEnded(p, cause);
      p->held.store(0, std::memory_order_relaxed);
      p->nonblocking_ok = true;
      return true;
    }
    Consume(p, static_cast<size_t>(sent));
  }
  return true;
}

// FlushForExit sends what p holds even on a non-blocking socket, waiting for
// room up to a bound: the process is about to lose the bytes otherwise.
void FlushForExit(PolicyState* p, int fd, FlushCause cause) {
  for (int tries = 0; tries < 50 && !Flush(p, fd, cause, false); ++tries) {
    pollfd pfd = {fd, POLLOUT, 0};
    LibcPoll(&pfd, 1, 100);
  }
}

void Uncork(PolicyState* p, int fd, FlushCause cause) {
  SetIntOption(fd, IPPROTO_TCP, TCP_CORK, 0);
  p->corked.store(false, std::memory_order_relaxed);
  NoteReleased(p, cause, p->cork_start);
}

// ReleaseLocked lets go of what p holds, signal handlers' writes included;
// p's lock is held.
void ReleaseLocked(PolicyState* p, FlushCause cause, bool may_block, bool exiting) {
  const int fd = p->fd.load(std::memory_order_relaxed);
  if (fd < 0) return;
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

// DrainOverflow moves what signal handlers wrote into the held bytes (or
// sends it with them), in order, once every reservation is copied; p's lock
// is held. A handler still copying (on another thread) is left for later.
void DrainOverflow(PolicyState* p) {
  const uint32_t length = p->overflow_length.load(std::memory_order_acquire);
  if (length == p->overflow_drained || p->overflow_ready.load(std::memory_order_acquire) != length) return;
  const iovec part = {p->overflow + p->overflow_drained, length - p->overflow_drained};
  if (p->held.load(std::memory_order_relaxed) + part.iov_len <= p->capacity) {
    Append(p, &part, 1);
  } else {
    // The handler's write was reported as accepted: send it even if that waits.
    SendHeldThen(p, p->fd.load(std::memory_order_relaxed), &part, 1, MSG_NOSIGNAL, false);
  }
  p->overflow_drained = length;
  // Start the buffer over once no handler reserved more meanwhile; a
  // reservation that did stays where it is, for the next drain.
  uint32_t expected = length;
  if (p->overflow_length.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
    p->overflow_ready.fetch_sub(length, std::memory_order_acq_rel);
    p->overflow_drained = 0;
  }
}

// SignalWrite takes a write made by a signal handler while its thread was
// inside the shim for the same socket; the interrupted call sends it.
ssize_t SignalWrite(PolicyState* p, const iovec* iov, int iovcnt, ssize_t (*passthrough)(void*), void* context) {
  const size_t n = IovecBytes(iov, iovcnt);
  uint32_t at = p->overflow_length.load(std::memory_order_acquire);
  do {
    if (p->overflow == nullptr || at + n > kOverflowCapacity) return passthrough(context);  // documented limit
  } while (!p->overflow_length.compare_exchange_weak(at, at + static_cast<uint32_t>(n), std::memory_order_acq_rel));
  for (int i = 0; i < iovcnt; ++i) {
    memcpy(p->overflow + at, iov[i].iov_base, iov[i].iov_len);
    at += static_cast<uint32_t>(iov[i].iov_len);
  }
  p->overflow_ready.fetch_add(static_cast<uint32_t>(n), std::memory_order_acq_rel);
  return static_cast<ssize_t>(n);
}

ssize_t CoalesceWrite(PolicyState* p, int fd, const iovec* iov, int iovcnt, int flags, bool special,
                      ssize_t (*passthrough)(void*), void* context) {
  if (p->pending_errno != 0) {
    const int e = p->pending_errno;
    p->pending_errno = 0;
    // The kernel signals a write on a broken pipe; so does the write that
    // learns of it, unless the application asked for no signal.
    if (e == EPIPE && (flags & MSG_NOSIGNAL) == 0) raise(SIGPIPE);
    errno = e;
    return -1;
  }
  const bool nonblocking = p->socket->nonblocking.load(std::memory_order_relaxed) || (flags & MSG_DONTWAIT) != 0;
  const size_t n = IovecBytes(iov, iovcnt);
  const uint32_t held = p->held.load(std::memory_order_relaxed);
  if (special || p->write_shutdown.load(std::memory_order_relaxed) || iovcnt <= 0 || iovcnt >= IOV_MAX || n == 0 || !EnsureBuffer(p, fd)) {
    if (held != 0) {
      if (!Flush(p, fd, FlushCause::kPassthrough, !nonblocking)) {
        errno = EAGAIN;
        return -1;
      }
      if (!HoldsSomething(p)) RemoveFromHeldSet(p);
    }
    return passthrough(context);
  }
  if (held + n <= p->capacity && (!nonblocking || p->nonblocking_ok) && HeldSetHasRoom(p)) {
    Append(p, iov, iovcnt);
    return static_cast<ssize_t>(n);
  }
  const ssize_t sent = SendHeldThen(p, fd, iov, iovcnt, flags, nonblocking);
  if (!HoldsSomething(p)) RemoveFromHeldSet(p);
  return sent;
}

// ---- the deadline thread ----

int CopyHeldSet(PolicyState** copy) {
  LockShared(&g_set_lock);
  const int n = g_held_set_size;
  memcpy(copy, g_held_set, sizeof(copy[0]) * static_cast<size_t>(n));
  UnlockShared(&g_set_lock);
  return n;
}

// ReleaseExpired releases what is past its deadline; returns the tick of
// the next deadline among what stays held (UINT64_MAX when none does).
uint64_t ReleaseExpired(uint64_t now, uint64_t retry_busy) {
  PolicyState* copy[kMaxHeldSockets];
  const int n = CopyHeldSet(copy);
  uint64_t next = UINT64_MAX;
  for (int i = 0; i < n; ++i) {
    PolicyState* p = copy[i];
    if (!p->lock.TryLock()) {  // busy: its own call is in progress
      next = Earliest(next, now + retry_busy);
      continue;
    }
    DrainOverflow(p);
    const PolicySettings& s = *p->settings;
    const bool corked = p->corked.load(std::memory_order_relaxed);
    const bool holding = p->held.load(std::memory_order_relaxed) != 0;
    const uint64_t cork_due = corked ? p->cork_start + TicksFromUs(s.cork_delay_us) : UINT64_MAX;
    const uint64_t hold_due = holding ? p->hold_start + TicksFromUs(s.coalesce_delay_us) : UINT64_MAX;
    if (cork_due <= now || hold_due <= now) {
      ReleaseLocked(p, FlushCause::kDeadline, false, false);
      // A flush the kernel had no room for is tried again soon.
      if (HoldsSomething(p)) next = Earliest(next, now + retry_busy);
    } else {
      next = Earliest(next, Earliest(cork_due, hold_due));
    }
    p->lock.Unlock();
  }
  return next;
}

uint32_t ShortestDelayUs() {
  uint32_t shortest = kMaxCorkDelayUs;
  for (int i = 0; i < g_policy_config->rule_count; ++i) {
    const PolicySettings& s = g_policy_config->rules[i].settings;
    if (s.cork && s.cork_delay_us < shortest) shortest = s.cork_delay_us;
    if (s.coalesce && s.coalesce_delay_us < shortest) shortest = s.coalesce_delay_us;
  }
  return shortest;
}

// FlusherLoop sleeps until the earliest deadline of what is held: while an
// application keeps releasing its own holds, it wakes about once per
// deadline, whatever the rate of writes.
void* FlusherLoop(void*) {
  const uint64_t shortest = TicksFromUs(ShortestDelayUs());
  const double ns_per_tick = 1e9 / g_runtime.tick_rate.TicksPerSecond();
  // Idle for this long, the thread stops waking on its own.
  const uint64_t idle_limit = TicksFromUs(100000);
  uint64_t idle_since = 0;
  for (;;) {
    uint64_t now = ReadTicks();
    uint64_t wake = now + shortest;
    if (AnyHeld()) {
      idle_since = 0;
      wake = Earliest(wake, ReleaseExpired(now, shortest / 4 + 1));
    } else if (idle_since == 0) {
      idle_since = now;
    } else if (now - idle_since > idle_limit) {
      // Nothing held for a while: sleep until a write holds something again,
      // looking once a second whether the application is still there.
      LockShared(&g_flusher_mutex);
      g_flusher_idle.store(true, std::memory_order_relaxed);
      while (!AnyHeld()) {
        timespec second;
        clock_gettime(CLOCK_MONOTONIC, &second);
        ++second.tv_sec;
        if (pthread_cond_clockwait(&g_flusher_wake, &g_flusher_mutex, CLOCK_MONOTONIC, &second) == ETIMEDOUT) {
          UnlockShared(&g_flusher_mutex);
          ExitIfApplicationGone();
          LockShared(&g_flusher_mutex);
        }
      }
      g_flusher_idle.store(false, std::memory_order_relaxed);
      UnlockShared(&g_flusher_mutex);
      idle_since = 0;
      continue;
    }
    now = ReadTicks();
    if (wake <= now) continue;
    const uint64_t sleep_ns = static_cast<uint64_t>(static_cast<double>(wake - now) * ns_per_tick) + 1;
    const timespec pause = {static_cast<time_t>(sleep_ns / 1000000000), static_cast<long>(sleep_ns % 1000000000)};
    clock_nanosleep(CLOCK_MONOTONIC, 0, &pause, nullptr);
  }
  return nullptr;
}

void StartFlusher() {
  if (g_flusher_started.exchange(true, std::memory_order_acq_rel)) return;
  if (!StartBackgroundThread(FlusherLoop, 128 * 1024, "flush")) {
    RawWarning("cannot start the policy deadline thread; held bytes wait for the next read or wait call");
  }
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
  Counter& conflicts = s->stats.policy_counters.conflicts;
  conflicts.Set(conflicts.Get() | bit);
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

}  // namespace

void LoadPolicyConfig(const char* path) {
  ErrnoSaver errno_saver;
  Dl_info self;
  char library[PATH_MAX];
  if (dladdr(reinterpret_cast<void*>(&LoadPolicyConfig), &self) == 0 || self.dli_fname == nullptr ||
      strlen(self.dli_fname) + 32 > sizeof(library)) {
    RawWarning("cannot locate libtcpadvise_config.so; %s is ignored and the program is only observed", path);
    return;
  }
  strcpy(library, self.dli_fname);
  char* slash = strrchr(library, '/');
  strcpy(slash != nullptr ? slash + 1 : library, "libtcpadvise_config.so");
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  LoadConfigFn load = handle != nullptr ? reinterpret_cast<LoadConfigFn>(dlsym(handle, kLoadConfigSymbol)) : nullptr;
  if (load == nullptr) {
    RawWarning("cannot load %s (%s); %s is ignored and the program is only observed", library, dlerror(), path);
    return;
  }
  PolicyConfig* config = PrivateNew<PolicyConfig>();
  char errors[512];
  if (config == nullptr || load(path, config, errors, sizeof(errors)) != 0) {
    char* newline = strchr(errors, '\n');
    if (newline != nullptr) *newline = '\0';
    RawWarning("bad policy config %s:%s (tcpadvise config check %s lists every mistake); the program is only observed",
               path, errors, path);
    PrivateFree(config);
    return;
  }
  g_policy_config = config;
}

void AttachPolicy(int fd, SocketState* s, const sockaddr* peer) {
  if (g_policy_config == nullptr) return;
  MatchInput in;
  in.program = g_runtime.program;
  in.role = s->id.role == Role::kClient ? 1 : s->id.role == Role::kServer ? 2 : 0;
  in.local_port = PortOf(s->id.local);
  in.peer = peer;
  const ExperimentConfig& experiment = g_policy_config->experiment;
  const int rule = experiment.enabled && Matches(experiment.match, in)
                       ? experiment.arms[DrawArm(experiment)].rule
                       : MatchRule(*g_policy_config, in);
  s->id.rule = static_cast<int16_t>(rule);
  if (rule < 0) return;
  const PolicySettings& settings = g_policy_config->rules[rule].settings;
  ErrnoSaver errno_saver;
  // An option the application set before the rule was chosen stays its own.
  ApplyUnlessSet(s, fd, settings, AppOption::kNodelay, IPPROTO_TCP, TCP_NODELAY, 1);
  ApplyUnlessSet(s, fd, settings, AppOption::kSndbuf, SOL_SOCKET, SO_SNDBUF, settings.sndbuf);
  ApplyUnlessSet(s, fd, settings, AppOption::kRcvbuf, SOL_SOCKET, SO_RCVBUF, settings.rcvbuf);
  if (!settings.cork && !settings.coalesce) return;
  if (s->policy_state == nullptr) s->policy_state = PrivateNew<PolicyState>();
  PolicyState* p = s->policy_state;
  if (p == nullptr) return;
  p->settings = &settings;
  p->socket = s;
  p->fd.store(fd, std::memory_order_relaxed);
  p->held.store(0, std::memory_order_relaxed);
  p->overflow_length.store(0, std::memory_order_relaxed);
  p->overflow_ready.store(0, std::memory_order_relaxed);
  p->overflow_drained = 0;
  p->write_shutdown.store(false, std::memory_order_relaxed);
  p->nonblocking_ok = true;
  p->pending_errno = 0;
  p->corked.store(false, std::memory_order_relaxed);
  p->app_corks = false;
  if (p->capacity != 0 && settings.coalesce_max_bytes != 0 && p->capacity != settings.coalesce_max_bytes) {
    PrivateFree(p->buffer);
    PrivateFree(p->overflow);
    p->buffer = p->overflow = nullptr;
    p->capacity = 0;
  }
  s->stats.policy = p;
}

ssize_t PolicyWrite(SocketState* s, int fd, const iovec* iov, int iovcnt, int flags, bool special,
                    ssize_t (*passthrough)(void*), void* context) {
  PolicyState* p = s->stats.policy;
  // The writes after a burst's first find the socket corked: nothing to do.
  if (p->corked.load(std::memory_order_relaxed)) return passthrough(context);
  if (!Enter(p)) {
    // A signal handler that interrupted its thread inside the shim: its
    // bytes queue behind what the socket holds (that socket is in the held
    // set, so a release or the deadline thread sends them); a socket that
    // holds nothing takes them directly.
    const bool behind = t_inside == p || p->held.load(std::memory_order_relaxed) != 0 ||
                        p->overflow_length.load(std::memory_order_acquire) != 0;
    return p->settings->coalesce && behind ? SignalWrite(p, iov, iovcnt, passthrough, context) : passthrough(context);
  }
  p->fd.store(fd, std::memory_order_relaxed);
  ssize_t result;
  if (p->settings->coalesce) {
    result = CoalesceWrite(p, fd, iov, iovcnt, flags, special, passthrough, context);
  } else {
    if (!p->corked.load(std::memory_order_relaxed) && !p->app_corks) {
      ErrnoSaver errno_saver;
      SetIntOption(fd, IPPROTO_TCP, TCP_CORK, 1);
      p->corked.store(true, std::memory_order_relaxed);
      p->cork_start = ReadTicks();
      CountersOf(p).corks.Increment();
      AddToHeldSet(p);
    }
    result = passthrough(context);
  }
  {
    ErrnoSaver errno_saver;
    Leave(p);
  }
  return result;
}

void ReleaseAll(FlushCause cause) {
  if (!AnyHeld() || InterruptedShim()) return;  // a signal handler: the interrupted call finishes the job
  ErrnoSaver errno_saver;
  PolicyState* copy[kMaxHeldSockets];
  const int n = CopyHeldSet(copy);
  const bool exiting = cause == FlushCause::kExit || cause == FlushCause::kExec || cause == FlushCause::kFork;
  for (int i = 0; i < n; ++i) {
    PolicyState* p = copy[i];
    Enter(p);
    ReleaseLocked(p, cause, true, exiting);
    Leave(p);
  }
}

void ReleaseSocket(SocketState* s, int fd, FlushCause cause) {
  PolicyState* p = s->stats.policy;
  if (p == nullptr || !Enter(p)) return;
  ErrnoSaver errno_saver;
  p->fd.store(fd, std::memory_order_relaxed);
  ReleaseLocked(p, cause, true, true);
  Leave(p);
}

void PolicySocketGone(SocketState* s) {
  PolicyState* p = s->stats.policy;
  if (p == nullptr || !Enter(p)) return;
  ErrnoSaver errno_saver;
  if (p->held.load(std::memory_order_relaxed) != 0) CountersOf(p).deferred_errors.Add(ETIMEDOUT, 1);
  p->held.store(0, std::memory_order_relaxed);
  p->corked.store(false, std::memory_order_relaxed);
  p->fd.store(-1, std::memory_order_relaxed);
  RemoveFromHeldSet(p);
  Leave(p);
}

void OnShutdown(SocketState* s, int how) {
  PolicyState* p = s->stats.policy;
  if (p != nullptr && how != SHUT_RD) p->write_shutdown.store(true, std::memory_order_relaxed);
}

void OnApplicationCork(SocketState* s, int fd) {
  if (s == nullptr) return;  // closed by another thread meanwhile
  PolicyState* p = s->stats.policy;
  if (p == nullptr || !p->settings->cork || !Enter(p)) return;
  // The application's own setting has already reached the kernel: it wins.
  p->app_corks = true;
  p->corked.store(false, std::memory_order_relaxed);
  p->fd.store(fd, std::memory_order_relaxed);
  RemoveFromHeldSet(p);
  Leave(p);
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
  t_inside = nullptr;
  t_in_shared = false;
}

void PolicyFdClosed(SocketState* s, int closed_fd, int other_fd) {
  PolicyState* p = s->policy_state;
  if (p == nullptr) return;
  int expected = closed_fd;
  p->fd.compare_exchange_strong(expected, other_fd, std::memory_order_relaxed);
}

void DropHeldInChild() {
  pthread_mutex_init(&g_set_lock, nullptr);
  pthread_mutex_init(&g_flusher_mutex, nullptr);
  pthread_cond_init(&g_flusher_wake, nullptr);
  for (int i = 0; i < g_held_set_size; ++i) {
    PolicyState* p = g_held_set[i];
    p->held.store(0, std::memory_order_relaxed);
    p->overflow_length.store(0, std::memory_order_relaxed);
    p->overflow_ready.store(0, std::memory_order_relaxed);
    p->overflow_drained = 0;
    p->in_held_set = false;
  }
  g_held_set_size = 0;
  g_held_count.store(0, std::memory_order_relaxed);
  g_flusher_started.store(false, std::memory_order_relaxed);
  g_flusher_idle.store(false, std::memory_order_relaxed);
}

}  // namespace tcpadvise
