#include "deadline_thread.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "background_thread.h"
#include "clock.h"
#include "held_set.h"
#include "policy.h"
#include "runtime.h"

namespace tcpadvise {

std::atomic<int> g_deadline_thread_state{0};

namespace {

// The deadline thread sleeps on g_flusher_wake while nothing is held.
pthread_mutex_t g_flusher_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_flusher_wake = PTHREAD_COND_INITIALIZER;
std::atomic<bool> g_flusher_idle{false};

uint64_t Earliest(uint64_t a, uint64_t b) { return a < b ? a : b; }

uint32_t ShortestDelayUs() {
  uint32_t shortest = kMaxCorkDelayUs;
  for (int i = 0; g_policy_config != nullptr && i < g_policy_config->rule_count; ++i) {
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

}  // namespace

bool StartDeadlineThread() {
  if (!ThreadStartSafe()) return false;  // a signal handler's write: a later one starts it
  int expected = 0;
  if (!g_deadline_thread_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return expected == 1;
  if (StartBackgroundThread(FlusherLoop, 128 * 1024, "flush") || StartBackgroundThread(FlusherLoop, 0, "flush")) {
    return true;
  }
  g_deadline_thread_state.store(2, std::memory_order_release);
  PolicyFailOpen("the policy deadline thread cannot start");
  return false;
}

void WakeDeadlineThread() {
  if (!g_flusher_idle.load(std::memory_order_relaxed)) return;
  LockShared(&g_flusher_mutex);
  pthread_cond_signal(&g_flusher_wake);
  UnlockShared(&g_flusher_mutex);
}

uint64_t ReleaseExpired(uint64_t now, uint64_t retry_busy) {
  static PolicyState* copy[kMaxHeldSockets];  // this thread's only
  const int n = CopyHeldSet(copy);
  uint64_t next = UINT64_MAX;
  for (int i = 0; i < n; ++i) {
    PolicyState* p = copy[i];
    if (!TryTakeTurn(p)) {  // busy: its own call is in progress
      next = Earliest(next, now + retry_busy);
      continue;
    }
    const PolicySettings& s = *p->settings;
    const bool corked = p->corked.load(std::memory_order_relaxed);
    const bool holding = p->held.load(std::memory_order_relaxed) != 0 ||
                         p->overflow_length.load(std::memory_order_relaxed) != 0;
    const uint64_t cork_due = corked ? p->cork_start + TicksFromUs(s.cork_delay_us) : UINT64_MAX;
    const uint64_t hold_due = holding ? p->hold_start + TicksFromUs(s.coalesce_delay_us) : UINT64_MAX;
    if (cork_due <= now || hold_due <= now) {
      ReleaseTaken(p, FlushCause::kDeadline, /*verify=*/true, /*may_block=*/false, /*exiting=*/false);
      // A flush the kernel had no room for is tried again soon.
      if (HoldsSomething(p)) next = Earliest(next, now + retry_busy);
    } else {
      next = Earliest(next, Earliest(cork_due, hold_due));
    }
    GiveTurn(p);
  }
  return next;
}

void ResetDeadlineThreadInChild() {
  // Never started: nothing took the mutex, and the child need not copy its page.
  if (g_deadline_thread_state.load(std::memory_order_relaxed) == 0) return;
  pthread_mutex_init(&g_flusher_mutex, nullptr);
  pthread_cond_init(&g_flusher_wake, nullptr);
  g_deadline_thread_state.store(0, std::memory_order_relaxed);
  g_flusher_idle.store(false, std::memory_order_relaxed);
}

}  // namespace tcpadvise
