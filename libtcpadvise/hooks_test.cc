#include "hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string.h>
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
    g_table.Init();
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

// A signal handler that interrupts an unwind makes its calls as itself:
// only libunwind's own are answered for it (call_sites.h: t_unwinding).
TEST_F(HooksTest, CallsDuringAnUnwindAreTheProgramsOwn) {
  int app[2];
  ASSERT_EQ(pipe2(app, O_NONBLOCK), 0);
  int fds[2] = {-1, -1};
  t_unwinding = true;
  const long written = hooks::Syscall(SYS_write, app[1], reinterpret_cast<long>("x"), 1, 0, 0, 0);
  char byte = 0;
  const ssize_t read_result = hooks::Read(app[0], &byte, 1);
  const int pipe_result = hooks::Pipe2(fds, O_CLOEXEC);
  t_unwinding = false;
  EXPECT_EQ(written, 1);
  EXPECT_EQ(read_result, 1);
  EXPECT_EQ(byte, 'x');
  ASSERT_EQ(pipe_result, 0);
  EXPECT_GE(fds[0], 0);
  for (int fd : {app[0], app[1], fds[0], fds[1]}) close(fd);
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

// A program that asks accept for no address gets none, and its addrlen,
// which the kernel ignores then, is not touched (here not even a pointer);
// the shim takes the peer from its own buffer, the same as getpeername's.
TEST_F(HooksTest, AnAcceptThatAsksNoAddressStillNamesThePeer) {
  const int listener = hooks::Socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(hooks::Listen(listener, 2), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  for (const bool accept4 : {false, true}) {
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    sockaddr_in client_name{};
    len = sizeof(client_name);
    ASSERT_EQ(getsockname(client, reinterpret_cast<sockaddr*>(&client_name), &len), 0);
    socklen_t* const bad_length = reinterpret_cast<socklen_t*>(16);
    const int server = accept4 ? hooks::Accept4(listener, nullptr, bad_length, SOCK_CLOEXEC)
                               : hooks::Accept(listener, nullptr, bad_length);
    ASSERT_GE(server, 0) << strerror(errno);
    const SocketState* s = g_table.Lookup(server);
    ASSERT_NE(s, nullptr);
    const auto& peer = reinterpret_cast<const sockaddr_in&>(s->id.peer);
    EXPECT_EQ(peer.sin_family, AF_INET);
    EXPECT_EQ(peer.sin_port, client_name.sin_port);
    EXPECT_EQ(peer.sin_addr.s_addr, client_name.sin_addr.s_addr);
    EXPECT_EQ(reinterpret_cast<const sockaddr_in&>(s->id.local).sin_port, addr.sin_port);
    EXPECT_NE(s->id.cookie, 0u);
    EXPECT_EQ(hooks::Close(server), 0);
    close(client);
  }
  EXPECT_EQ(hooks::Close(listener), 0);
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
