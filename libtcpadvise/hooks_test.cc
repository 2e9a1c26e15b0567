#include "hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include "call_sites.h"
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

// libunwind's check of an address (call_sites.h) is answered without any
// fd: here the numbers it would use are a pipe of the program's, which
// keeps its byte and gets none.
TEST_F(HooksTest, LibunwindsPipeCallsTouchNoFd) {
  int app[2];
  ASSERT_EQ(pipe2(app, O_NONBLOCK), 0);
  ASSERT_EQ(write(app[1], "x", 1), 1);
  char byte = 0;
  int fds[2] = {-1, -1};
  t_unwinding = true;
  errno = 0;
  const ssize_t read_result = hooks::Read(app[0], &byte, 1);
  const int read_errno = errno;
  const long readable = hooks::Syscall(SYS_write, app[1], reinterpret_cast<long>(&byte), 1, 0, 0, 0);
  const long unreadable = hooks::Syscall(SYS_write, app[1], 16, 1, 0, 0, 0);
  const int write_errno = errno;
  const int pipe_result = hooks::Pipe2(fds, O_CLOEXEC);
  const int pipe_errno = errno;
  t_unwinding = false;
  EXPECT_EQ(read_result, -1);
  EXPECT_EQ(read_errno, EAGAIN);
  EXPECT_EQ(readable, 1);
  EXPECT_EQ(unreadable, -1);
  EXPECT_EQ(write_errno, EFAULT);
  EXPECT_EQ(pipe_result, -1);
  EXPECT_EQ(pipe_errno, EMFILE);
  EXPECT_EQ(fds[0], -1);
  char got[4];
  EXPECT_EQ(read(app[0], got, sizeof(got)), 1);  // the program's byte, and only it
  EXPECT_EQ(got[0], 'x');
  close(app[0]);
  close(app[1]);
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
