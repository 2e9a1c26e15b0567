// sigclose: a SIGALRM handler, firing every 100 us, opens and closes TCP
// sockets (close and socket are async-signal-safe) while the main loop does
// the same and connects: whatever the handler interrupts, the program must
// neither deadlock nor crash. Prints "done N" after about a second.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "progs.h"

namespace {

volatile sig_atomic_t g_handled = 0;

void OnAlarm(int) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0) close(fd);
  g_handled = g_handled + 1;
}

}  // namespace

int main() {
  sockaddr_in addr;
  const int listener = ListenOnLoopback(&addr);
  if (listener < 0) return 2;
  OnSignal(SIGALRM, OnAlarm);
  const itimerval every = {{0, 100}, {0, 100}};
  setitimer(ITIMER_REAL, &every, nullptr);
  const long rounds = RoundsFor(1000, [&] {
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    const int server = accept(listener, nullptr, nullptr);
    const int copy = dup(client);
    close(copy);
    close(client);
    if (server >= 0) close(server);
  });
  const itimerval off = {};
  setitimer(ITIMER_REAL, &off, nullptr);
  printf("done %ld rounds, %d signals\n", rounds, static_cast<int>(g_handled));
  return 0;
}
