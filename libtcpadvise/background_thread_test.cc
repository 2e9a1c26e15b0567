#include "background_thread.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>

#include <atomic>

#include <gtest/gtest.h>

namespace tcpadvise {
namespace {

// g_all_blocked: whether the shim thread found every signal blocked (-1:
// not run yet).
std::atomic<int> g_all_blocked{-1};

void* RecordMask(void*) {
  sigset_t mask;
  sigemptyset(&mask);
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  bool all = true;
  for (int sig = 1; sig < NSIG; ++sig) {
    // glibc's internal signals (SIGCANCEL, SIGSETXID) are never blocked.
    if (sig != SIGKILL && sig != SIGSTOP && (sig < 32 || sig > 34)) all = all && sigismember(&mask, sig) == 1;
  }
  g_all_blocked.store(all ? 1 : 0);
  return nullptr;
}

TEST(BackgroundThreadTest, StartsWithEverySignalBlockedAndTheCallersMaskKept) {
  sigset_t before, after;
  sigemptyset(&before);
  sigemptyset(&after);
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  ASSERT_TRUE(StartBackgroundThread(RecordMask, 0, "test"));
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  while (g_all_blocked.load() == -1) sched_yield();
  EXPECT_EQ(g_all_blocked.load(), 1);
  EXPECT_EQ(before.__val[0], after.__val[0]);  // all the kernel keeps of a mask
}

}  // namespace
}  // namespace tcpadvise
