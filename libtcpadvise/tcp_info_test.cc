#include "tcp_info.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
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

// ListenOnLoopback returns a socket listening on 127.0.0.1; its address in addr.
int ListenOnLoopback(sockaddr_in* addr) {
  *addr = {};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(*addr);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(addr), len), 0);
  EXPECT_EQ(listen(listener, 1), 0);
  EXPECT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(addr), &len), 0);
  return listener;
}

// ReadKernelOptions reads the buffers in one call (SO_MEMINFO): the figures
// SO_SNDBUF and SO_RCVBUF give, whatever the program set.
TEST(TcpInfoTest, KernelOptionsAreWhatGetsockoptGives) {
  sockaddr_in addr;
  const int listener = ListenOnLoopback(&addr);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1, sndbuf = 50000, rcvbuf = 70000;
  ASSERT_EQ(setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
  ASSERT_EQ(setsockopt(client, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
  ASSERT_EQ(setsockopt(client, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
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

// What ReadTcpInfo gives as outq_bytes is what SIOCOUTQ reads (0 where it
// fails), whether it asked or knew from TCP_INFO: at rest, with bytes the
// peer has not read (acknowledged), with bytes the kernel could not send
// yet, after a shutdown, and on the listener.
TEST(TcpInfoTest, SendQueueIsWhatSiocoutqReads) {
  sockaddr_in addr;
  const int listener = ListenOnLoopback(&addr);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  const int small = 4096;
  ASSERT_EQ(setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const int server = accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);
  // The two reads are apart in time: an acknowledgement between them is
  // read again, a few times, until the queue stays put.
  auto expect_outq = [](int fd, const char* when) {
    TcpInfoSummary info;
    int outq = 0;
    for (int attempt = 0; attempt < 50; ++attempt) {
      ASSERT_TRUE(ReadTcpInfo(fd, &info)) << when;
      if (ioctl(fd, SIOCOUTQ, &outq) != 0) outq = 0;
      if (info.outq_bytes == static_cast<uint32_t>(outq)) break;
      usleep(10000);
    }
    EXPECT_EQ(info.outq_bytes, static_cast<uint32_t>(outq)) << when;
  };
  expect_outq(server, "at rest");
  expect_outq(listener, "listening");
  char byte = 'x';
  ASSERT_EQ(write(server, &byte, 1), 1);
  ASSERT_EQ(read(client, &byte, 1), 1);
  usleep(20000);  // the acknowledgement
  expect_outq(server, "written, read and acknowledged");
  // More than the client's small receive window: some waits unsent, some unacknowledged.
  static char block[1 << 20];
  const int nonblocking = 1;
  ASSERT_EQ(ioctl(server, FIONBIO, &nonblocking), 0);
  ssize_t sent = 0;
  while (sent < static_cast<ssize_t>(sizeof(block))) {
    const ssize_t n = write(server, block, sizeof(block) - static_cast<size_t>(sent));
    if (n <= 0) break;
    sent += n;
  }
  usleep(20000);
  int outq = 0;
  ASSERT_EQ(ioctl(server, SIOCOUTQ, &outq), 0);
  EXPECT_GT(outq, 0);
  expect_outq(server, "the peer's window full");
  ASSERT_EQ(shutdown(client, SHUT_WR), 0);
  usleep(20000);
  expect_outq(server, "the peer's half closed (close-wait)");
  for (const int fd : {server, client, listener}) close(fd);
}

}  // namespace
}  // namespace tcpadvise
