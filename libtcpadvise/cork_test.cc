#include "cork.h"

#include <gtest/gtest.h>
#include <netinet/tcp.h>

#include "held_set.h"
#include "policy_test_util.h"

namespace tcpadvise {
namespace {

int CorkOf(int fd) {
  int value = -1;
  socklen_t len = sizeof(value);
  getsockopt(fd, IPPROTO_TCP, TCP_CORK, &value, &len);
  return value;
}

TEST(CorkTest, StartCorksOnceAndUncorkReleases) {
  PolicyFixture f(false);
  StartCork(&f.state, f.pair.client);
  EXPECT_EQ(CorkOf(f.pair.client), 1);
  EXPECT_TRUE(f.state.corked.load());
  EXPECT_TRUE(f.state.in_held_set);
  StartCork(&f.state, f.pair.client);
  EXPECT_EQ(f.socket.stats.policy_counters()->corks.Get(), 1u);
  EXPECT_EQ(write(f.pair.client, "abc", 3), 3);
  Uncork(&f.state, f.pair.client, FlushCause::kRead);
  EXPECT_EQ(CorkOf(f.pair.client), 0);
  EXPECT_FALSE(f.state.corked.load());
  EXPECT_EQ(f.socket.stats.policy_counters()->flushes[static_cast<int>(FlushCause::kRead)].Get(), 1u);
  EXPECT_EQ(f.pair.ReadAvailable(), "abc");
  RemoveFromHeldSet(&f.state);
}

TEST(CorkTest, TheApplicationsOwnCorkWins) {
  PolicyFixture f(false);
  f.state.app_corks = true;
  StartCork(&f.state, f.pair.client);
  EXPECT_EQ(CorkOf(f.pair.client), 0);
  EXPECT_FALSE(f.state.corked.load());
}

TEST(CorkTest, ASocketThatIsNotTcpIsNeverCorked) {
  PolicyFixture f(false);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  StartCork(&f.state, fds[1]);
  EXPECT_FALSE(f.state.corked.load());
  EXPECT_FALSE(f.state.in_held_set);
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace tcpadvise
