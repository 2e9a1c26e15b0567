#include "counter.h"

#include <signal.h>
#include <sys/time.h>

#include <atomic>

#include "gtest/gtest.h"

namespace tcpadvise {
namespace {

Counter g_counter;
std::atomic<uint64_t> g_handler_adds{0};

void AddFromHandler(int) {
  g_counter.Add(3);
  g_handler_adds.fetch_add(1, std::memory_order_relaxed);
}

// A signal handler that adds while its thread is inside an Add (a SIGALRM
// handler writing to the socket the main loop writes to) loses nothing:
// tens of thousands of interruptions, every one counted.
TEST(CounterTest, AddIsAtomicAgainstItsOwnThreadsSignalHandlers) {
  struct sigaction action = {};
  action.sa_handler = AddFromHandler;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGALRM, &action, nullptr), 0);
  const itimerval every_20us = {{0, 20}, {0, 20}};
  ASSERT_EQ(setitimer(ITIMER_REAL, &every_20us, nullptr), 0);
  uint64_t main_adds = 0;
  while (g_handler_adds.load(std::memory_order_relaxed) < 20000) {
    g_counter.Add(1);
    ++main_adds;
  }
  const itimerval off = {};
  ASSERT_EQ(setitimer(ITIMER_REAL, &off, nullptr), 0);
  signal(SIGALRM, SIG_DFL);
  EXPECT_EQ(g_counter.Get(), main_adds + 3 * g_handler_adds.load());
}

TEST(CounterTest, AddFetchReturnsTheNewValue) {
  Counter c;
  EXPECT_EQ(c.AddFetch(5), 5u);
  c.Increment();
  EXPECT_EQ(c.AddFetch(1), 7u);
  c.Set(2);
  EXPECT_EQ(c.Get(), 2u);
}

}  // namespace
}  // namespace tcpadvise
