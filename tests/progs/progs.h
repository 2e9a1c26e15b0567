// progs.h: what the test programs set up alike: a listener on 127.0.0.1,
// on a port the kernel picks, a signal handler, and a loop that runs for a
// while.
#ifndef TESTS_PROGS_PROGS_H_
#define TESTS_PROGS_PROGS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// ListenOnLoopback returns a TCP socket listening on 127.0.0.1 and puts its
// address in addr; -1 on failure.
inline int ListenOnLoopback(sockaddr_in* addr, int backlog = 1024) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(*addr);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(addr), sizeof(*addr)) != 0 ||
      listen(listener, backlog) != 0 || getsockname(listener, reinterpret_cast<sockaddr*>(addr), &len) != 0) {
    if (listener >= 0) close(listener);
    return -1;
  }
  return listener;
}

// OnSignal installs handler for sig, restarting interrupted calls.
inline void OnSignal(int sig, void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, nullptr);
}

// RoundsFor runs round() again and again for `ms` milliseconds of the
// monotonic clock, and returns how many times it ran.
template <typename Round>
long RoundsFor(long ms, Round round) {
  timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long rounds = 0;
  do {
    round();
    ++rounds;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000L + (now.tv_nsec - start.tv_nsec) / 1000000L < ms);
  return rounds;
}

#endif  // TESTS_PROGS_PROGS_H_
