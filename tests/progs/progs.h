// progs.h: what the test programs set up alike: a listener on 127.0.0.1,
// on a port the kernel picks, and a signal handler.
#ifndef TESTS_PROGS_PROGS_H_
#define TESTS_PROGS_PROGS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
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

#endif  // TESTS_PROGS_PROGS_H_
