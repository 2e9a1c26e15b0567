#include "real_libc.h"

#include <errno.h>
#include <string.h>

#include <gtest/gtest.h>

namespace tcpadvise {
namespace {

// SetDirectCalls(true) switches the hot slots to the shim's system calls,
// which move the same bytes and set errno as libc's do; false puts libc's back.
TEST(RealLibcTest, DirectCallsMakeTheSystemCallThenLibcsComeBack) {
  BindRealLibc();
  const auto libc_write = g_real.write;
  const auto libc_read = g_real.read;
  const auto libc_epoll_wait = g_real.epoll_wait;
  SetDirectCalls(true);
  EXPECT_NE(g_real.write, libc_write);
  EXPECT_NE(g_real.epoll_wait, libc_epoll_wait);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_EQ(LibcWrite(p[1], "abc", 3), 3);
  char buf[8] = {};
  EXPECT_EQ(LibcRead(p[0], buf, sizeof(buf)), 3);
  EXPECT_EQ(memcmp(buf, "abc", 3), 0);
  errno = 0;
  EXPECT_EQ(LibcWrite(-1, "x", 1), -1);
  EXPECT_EQ(errno, EBADF);
  errno = 0;
  EXPECT_EQ(LibcSend(p[1], "x", 1, 0), -1);
  EXPECT_EQ(errno, ENOTSOCK);
  errno = 0;
  epoll_event event;
  EXPECT_EQ(LibcEpollWait(-1, &event, 1, 0), -1);
  EXPECT_EQ(errno, EBADF);
  SetDirectCalls(false);
  EXPECT_EQ(g_real.write, libc_write);
  EXPECT_EQ(g_real.read, libc_read);
  EXPECT_EQ(g_real.epoll_wait, libc_epoll_wait);
  EXPECT_EQ(LibcWrite(p[1], "de", 2), 2);
  EXPECT_EQ(LibcRead(p[0], buf, sizeof(buf)), 2);
  close(p[0]);
  close(p[1]);
}

ssize_t StubWrite(int, const void*, size_t n) { return static_cast<ssize_t>(n); }

// A switch to the state the slots are in stores nothing: an application's
// every pthread_create asks for libc's calls, and must not undo a slot set
// since (a benchmark's stub).
TEST(RealLibcTest, SwitchingToTheCurrentStateStoresNothing) {
  BindRealLibc();
  SetDirectCalls(false);
  const auto libc_write = g_real.write;
  g_real.write = StubWrite;
  SetDirectCalls(false);
  EXPECT_EQ(g_real.write, &StubWrite);
  g_real.write = libc_write;
}

}  // namespace
}  // namespace tcpadvise
