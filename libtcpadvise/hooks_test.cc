#include "hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include "policy_test_util.h"
#include "socket_table.h"

namespace tcpadvise {
namespace {

class HooksTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    BindRealLibc();
    g_runtime.tick_rate.Start();
    ASSERT_TRUE(g_table.Init());
  }
};

TEST_F(HooksTest, SendmsgWithABadMsghdrGetsEfaultOnATrackedSocket) {
  TcpPair pair;
  ASSERT_NE(g_table.Track(pair.client, SocketIdentity{}), nullptr);
  errno = 0;
  EXPECT_EQ(hooks::Sendmsg(pair.client, reinterpret_cast<const msghdr*>(16), 0), -1);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(hooks::Write(pair.client, nullptr, 5), -1);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(hooks::Write(pair.client, "abc", 3), 3);
  EXPECT_EQ(g_table.Lookup(pair.client)->stats.write_calls.Get(), 3u);
  EXPECT_EQ(hooks::Close(pair.client), 0);
  pair.client = -1;
}

TEST_F(HooksTest, SyscallCloseIsSeenLikeClose) {
  TcpPair pair;
  ASSERT_NE(g_table.Track(pair.client, SocketIdentity{}), nullptr);
  EXPECT_EQ(hooks::Syscall(SYS_close, pair.client, 0, 0, 0, 0, 0), 0);
  EXPECT_EQ(g_table.Lookup(pair.client), nullptr);
  pair.client = -1;
}

TEST_F(HooksTest, AFileOnTheNumberOfAnUnseenCloseRetiresTheStaleEntry) {
  TcpPair pair;
  ASSERT_NE(g_table.Track(pair.client, SocketIdentity{}), nullptr);
  const int number = pair.client;
  ASSERT_EQ(syscall(SYS_close, number), 0);  // libc's, not the hook: unseen
  pair.client = -1;
  const int any = open("/dev/null", O_WRONLY);
  const int file = hooks::NewFile(fcntl(any, F_DUPFD, number));  // the lowest free fd from number
  close(any);
  ASSERT_EQ(file, number);
  EXPECT_EQ(g_table.Lookup(file), nullptr);
  EXPECT_EQ(hooks::Write(file, "x", 1), 1);
  close(file);
}

TEST_F(HooksTest, FortifiedAndNewerWaitsPassThrough) {
  TcpPair pair;
  pollfd pfd = {pair.client, POLLOUT, 0};
  EXPECT_EQ(hooks::PollChk(&pfd, 1, 0, sizeof(pfd)), 1);
  const timespec zero = {0, 0};
  EXPECT_EQ(hooks::PpollChk(&pfd, 1, &zero, nullptr, sizeof(pfd)), 1);
  const int ep = epoll_create1(0);
  epoll_event ev = {};
  ev.events = EPOLLOUT;
  epoll_ctl(ep, EPOLL_CTL_ADD, pair.client, &ev);
  EXPECT_EQ(hooks::EpollPwait2(ep, &ev, 1, &zero, nullptr), 1);
  close(ep);
}

}  // namespace
}  // namespace tcpadvise
