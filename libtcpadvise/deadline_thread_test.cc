#include "deadline_thread.h"

#include <errno.h>
#include <gtest/gtest.h>

#include "clock.h"
#include "coalesce.h"
#include "held_set.h"
#include "policy_test_util.h"

namespace tcpadvise {
namespace {

void Hold(PolicyFixture& f, const char* text) {
  ASSERT_TRUE(f.state.lock.TryTake());
  ASSERT_TRUE(EnsureBuffer(&f.state, f.pair.client));
  const iovec iov = {const_cast<char*>(text), strlen(text)};
  ASSERT_TRUE(Append(&f.state, &iov, 1));
  f.state.lock.Give();
}

TEST(DeadlineThreadTest, ReleasesWhatIsPastItsDeadlineOnly) {
  PolicyFixture f(true);
  f.settings.coalesce_delay_us = 1000;
  Hold(f, "late");
  const uint64_t start = f.state.hold_start;
  EXPECT_NE(ReleaseExpired(start, 1), UINT64_MAX);  // not due yet: stays
  EXPECT_EQ(f.state.held.load(), 4u);
  EXPECT_EQ(ReleaseExpired(start + TicksFromUs(2000), 1), UINT64_MAX);
  EXPECT_EQ(f.state.held.load(), 0u);
  EXPECT_EQ(f.pair.ReadAvailable(), "late");
  EXPECT_EQ(f.socket.stats.policy_counters()->flushes[static_cast<int>(FlushCause::kDeadline)].Get(), 1u);
  FreeBuffers(&f.state);
}

TEST(DeadlineThreadTest, NeverSendsIntoAnotherSocketOnTheSameNumber) {
  PolicyFixture f(true);
  f.settings.coalesce_delay_us = 1000;
  Hold(f, "stale");
  // The application closed the socket where the shim could not see it, and
  // the number now belongs to another connection.
  TcpPair other;
  ASSERT_EQ(dup2(other.client, f.pair.client), f.pair.client);
  EXPECT_EQ(ReleaseExpired(f.state.hold_start + TicksFromUs(2000), 1), UINT64_MAX);
  EXPECT_EQ(other.ReadAvailable(50), "");
  EXPECT_TRUE(f.state.gone.load());
  EXPECT_EQ(f.socket.stats.policy_counters()->deferred_errors.Get(EBADF), 1u);
  EXPECT_FALSE(AnyHeld());
  FreeBuffers(&f.state);
}

TEST(DeadlineThreadTest, ABusySocketIsLeftToItsHolder) {
  PolicyFixture f(true);
  f.settings.coalesce_delay_us = 1000;
  Hold(f, "busy");
  ASSERT_TRUE(f.state.lock.TryTake());
  const uint64_t now = f.state.hold_start + TicksFromUs(2000);
  EXPECT_EQ(ReleaseExpired(now, 7), now + 7);
  EXPECT_EQ(f.state.held.load(), 4u);
  f.state.lock.Give();
  ReleaseExpired(now, 7);
  EXPECT_EQ(f.pair.ReadAvailable(), "busy");
  FreeBuffers(&f.state);
}

TEST(DeadlineThreadTest, StartsOnce) {
  g_runtime.tick_rate.Start();
  EXPECT_TRUE(EnsureDeadlineThread());
  EXPECT_TRUE(EnsureDeadlineThread());
  EXPECT_EQ(PolicyFailOpenReason(), nullptr);
}

}  // namespace
}  // namespace tcpadvise
