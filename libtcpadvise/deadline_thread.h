// DeadlineThread: the shim's thread that releases what a policy has held
// past its deadline (cork and coalesce max_delay_us), for programs that
// neither read nor wait in time. It flushes only what the kernel takes at
// once, and never waits for a socket whose turn another thread holds.
#ifndef TCPADVISE_DEADLINE_THREAD_H_
#define TCPADVISE_DEADLINE_THREAD_H_

#include <stdint.h>

#include <atomic>

namespace tcpadvise {

// g_deadline_thread_state: 0 not tried, 1 running, 2 could not start.
extern std::atomic<int> g_deadline_thread_state;
bool StartDeadlineThread();

// EnsureDeadlineThread starts the thread once (again in a fork child); false
// when it cannot start, after turning the policy off for the process
// (PolicyFailOpen): held bytes would wait for the application's next call;
// false too, with nothing turned off, in a signal handler's call
// (ThreadStartSafe), where the write passes through.
// It tries a small stack first, then the default size (a program with a
// large thread-local area leaves a small stack no room). The policy calls it
// at the first write it acts on: a process whose writes all pass straight
// through never starts the thread.
inline bool EnsureDeadlineThread() {
  const int state = g_deadline_thread_state.load(std::memory_order_acquire);
  if (__builtin_expect(state == 1, 1)) return true;
  return state == 0 && StartDeadlineThread();
}

// DeadlineThreadRunning tells whether the thread has started in this process.
inline bool DeadlineThreadRunning() { return g_deadline_thread_state.load(std::memory_order_acquire) == 1; }

// WakeDeadlineThread wakes the thread if it sleeps for want of held bytes.
void WakeDeadlineThread();

// ReleaseExpired releases what is past its deadline at now (ticks); returns
// the tick of the next deadline (UINT64_MAX when nothing stays held). A
// socket busy with another thread is looked at again after retry_busy.
uint64_t ReleaseExpired(uint64_t now, uint64_t retry_busy);

// ResetDeadlineThreadInChild forgets, in a fork child, the parent's thread.
void ResetDeadlineThreadInChild();

}  // namespace tcpadvise

#endif  // TCPADVISE_DEADLINE_THREAD_H_
