#include "tcp_info.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tcpadvise {
namespace {

int IntOption(int fd, int level, int name) {
  int value = 0;
  socklen_t len = sizeof(value);
  EXPECT_EQ(getsockopt(fd, level, name, &value, &len), 0);
  return value;
}

// ReadKernelOptions reads the buffers in one call (SO_MEMINFO): the figures
// SO_SNDBUF and SO_RCVBUF give, whatever the program set.
TEST(TcpInfoTest, KernelOptionsAreWhatGetsockoptGives) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1, sndbuf = 50000, rcvbuf = 70000;
  ASSERT_EQ(setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
  ASSERT_EQ(setsockopt(client, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
  ASSERT_EQ(setsockopt(client, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), len), 0);
  const int server = accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);
  ASSERT_EQ(setsockopt(server, IPPROTO_TCP, TCP_CORK, &one, sizeof(one)), 0);
  for (const int fd : {client, server}) {
    KernelOptions o;
    ASSERT_TRUE(ReadKernelOptions(fd, &o));
    EXPECT_TRUE(o.valid);
    EXPECT_EQ(o.nodelay, fd == client);
    EXPECT_EQ(o.cork, fd == server);
    EXPECT_EQ(o.sndbuf, IntOption(fd, SOL_SOCKET, SO_SNDBUF));
    EXPECT_EQ(o.rcvbuf, IntOption(fd, SOL_SOCKET, SO_RCVBUF));
  }
  EXPECT_EQ(IntOption(client, SOL_SOCKET, SO_SNDBUF), 2 * sndbuf);  // the kernel doubles it
  KernelOptions closed;
  EXPECT_FALSE(ReadKernelOptions(-1, &closed));
  EXPECT_FALSE(closed.valid);
  for (const int fd : {server, client, listener}) close(fd);
}

}  // namespace
}  // namespace tcpadvise
