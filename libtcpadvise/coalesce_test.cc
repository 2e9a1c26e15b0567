#include "coalesce.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include "held_set.h"
#include "policy_test_util.h"

namespace tcpadvise {
namespace {

ssize_t Write(PolicyFixture& f, const void* buf, size_t n) {
  Passthrough pass = {f.pair.client, {const_cast<void*>(buf), n}};
  EXPECT_TRUE(f.state.lock.TryTake());
  const ssize_t r = CoalesceWrite(&f.state, f.pair.client, &pass.iov, 1, 0, false, Passthrough::Call, &pass);
  const int saved = errno;
  f.state.lock.Give();
  errno = saved;
  return r;
}

TEST(CoalesceTest, SmallWritesAreHeldThenFlushedInOrder) {
  PolicyFixture f(true);
  EXPECT_EQ(Write(f, "abc", 3), 3);
  EXPECT_EQ(Write(f, "def", 3), 3);
  EXPECT_EQ(f.state.held.load(), 6u);
  EXPECT_TRUE(f.state.in_held_set);
  EXPECT_EQ(f.pair.ReadAvailable(50), "");
  EXPECT_TRUE(Flush(&f.state, f.pair.client, FlushCause::kRead, true));
  EXPECT_EQ(f.pair.ReadAvailable(), "abcdef");
  EXPECT_EQ(f.socket.stats.policy_counters()->bytes_held.Get(), 6u);
  RemoveFromHeldSet(&f.state);
  FreeBuffers(&f.state);
}

TEST(CoalesceTest, AWriteBeyondTheBufferGoesAfterWhatIsHeld) {
  PolicyFixture f(true);
  EXPECT_EQ(Write(f, "head-", 5), 5);
  const std::string big(5000, 'x');
  EXPECT_EQ(Write(f, big.data(), big.size()), static_cast<ssize_t>(big.size()));
  EXPECT_EQ(f.state.held.load(), 0u);
  EXPECT_EQ(f.pair.ReadAvailable(), "head-" + big);
  RemoveFromHeldSet(&f.state);
  FreeBuffers(&f.state);
}

TEST(CoalesceTest, AFullBufferGoesAtOnce) {
  PolicyFixture f(true);  // max_bytes 1000
  const std::string first(600, 'a'), second(400, 'b');
  EXPECT_EQ(Write(f, first.data(), first.size()), 600);
  EXPECT_EQ(f.state.held.load(), 600u);
  EXPECT_EQ(f.pair.ReadAvailable(50), "");
  // The write that fills the buffer sends it, with no read or wait to come.
  EXPECT_EQ(Write(f, second.data(), second.size()), 400);
  EXPECT_EQ(f.state.held.load(), 0u);
  EXPECT_FALSE(f.state.in_held_set);
  EXPECT_EQ(f.pair.ReadAvailable(), first + second);
  EXPECT_EQ(f.socket.stats.policy_counters()->flushes[static_cast<int>(FlushCause::kLimit)].Get(), 1u);
  // The next small write is held again.
  EXPECT_EQ(Write(f, "c", 1), 1);
  EXPECT_EQ(f.state.held.load(), 1u);
  EXPECT_EQ(f.pair.ReadAvailable(50), "");
  RemoveFromHeldSet(&f.state);
  FreeBuffers(&f.state);
}

TEST(CoalesceTest, BadBufferIsNeverHeldAndGetsTheKernelsEfault) {
  PolicyFixture f(true);
  EXPECT_EQ(Write(f, "ok", 2), 2);
  void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  iovec bad = {page, 10};
  EXPECT_TRUE(f.state.lock.TryTake());
  EXPECT_FALSE(Append(&f.state, &bad, 1));
  f.state.lock.Give();
  EXPECT_EQ(f.state.held.load(), 2u);
  errno = 0;
  EXPECT_EQ(Write(f, page, 10), -1);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(Write(f, reinterpret_cast<void*>(16), 10), -1);
  EXPECT_EQ(errno, EFAULT);
  // What was held went first.
  EXPECT_EQ(f.state.held.load(), 0u);
  EXPECT_EQ(f.pair.ReadAvailable(), "ok");
  munmap(page, 4096);
  RemoveFromHeldSet(&f.state);
  FreeBuffers(&f.state);
}

TEST(CoalesceTest, FlushOnAFullSocketKeepsTheRestForLater) {
  PolicyFixture f(true);
  int small = 4096;
  setsockopt(f.pair.client, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  setsockopt(f.pair.server, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  fcntl(f.pair.client, F_SETFL, O_NONBLOCK);
  const std::string fill(1 << 20, 'f');
  while (send(f.pair.client, fill.data(), fill.size(), MSG_DONTWAIT) > 0) {
  }
  EXPECT_EQ(Write(f, "tail", 4), 4);  // held: a blocking-socket view of the policy
  EXPECT_FALSE(Flush(&f.state, f.pair.client, FlushCause::kDeadline, false));
  EXPECT_EQ(f.state.held.load(), 4u);
  RemoveFromHeldSet(&f.state);
  FreeBuffers(&f.state);
}

}  // namespace
}  // namespace tcpadvise
