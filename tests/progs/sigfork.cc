// sigfork: a SIGALRM handler forks a child that exits at once (fork is
// async-signal-safe in glibc) while the main loop connects, accepts, writes,
// reads and closes TCP sockets, so that the handler lands inside the shim's
// hooks: the program must neither deadlock nor crash. The main loop arms a
// one-shot 300 us timer whenever none is pending (a periodic one would starve
// it where a fork takes longer than the period: under AddressSanitizer).
// Prints "done <rounds> forks <forks>" after about two seconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"
namespace {

volatile sig_atomic_t g_forks = 0;
volatile sig_atomic_t g_pending = 0;

void OnAlarm(int) {
  g_pending = 0;
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  if (pid > 0) {
    g_forks = g_forks + 1;
    waitpid(pid, nullptr, 0);
  }
}

}  // namespace

int main() {
  sockaddr_in addr;
  const int listener = ListenOnLoopback(&addr);
  if (listener < 0) return 2;
  OnSignal(SIGALRM, OnAlarm);
  const itimerval once = {{0, 0}, {0, 300}};
  const long rounds = RoundsFor(2000, [&] {
    if (!g_pending) {
      g_pending = 1;
      setitimer(ITIMER_REAL, &once, nullptr);
    }
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    const int server = accept(listener, nullptr, nullptr);
    write(client, "x", 1);
    char c;
    read(server, &c, 1);
    close(client);
    close(server);
  });
  printf("done %ld forks %d\n", rounds, static_cast<int>(g_forks));
  return 0;
}
