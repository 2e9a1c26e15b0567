// sigfork: a SIGALRM handler forks a child (fork is async-signal-safe in
// glibc) while the main loop connects, accepts, writes, reads and closes TCP
// sockets, so that the handler lands inside the shim's hooks: the program
// must neither deadlock nor crash. The main loop arms a one-shot 300 us
// timer whenever none is pending (a periodic one would starve it where a
// fork takes longer than the period: under AddressSanitizer).
//
// By default the child exits at once. `sigfork write`: the handler returns
// in the child too, which finishes its round, connects to a second
// listener, writes "ab" then "cd" and leaves by exit(); the parent's handler
// reads that connection to its end, so that bytes a policy held in a child
// forked inside the shim and not flushed on its way out are counted lost.
// The child's round may take the parent's connection or byte: the parent's
// accept and read then find nothing (non-blocking) and the round goes on.
//
// Prints "done <rounds> forks <forks> lost <children whose bytes did not
// all arrive>" after about two seconds.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"
namespace {

volatile sig_atomic_t g_forks = 0;
volatile sig_atomic_t g_pending = 0;
volatile sig_atomic_t g_lost = 0;
volatile sig_atomic_t g_in_child = 0;
bool g_children_write = false;
int g_children_listener = -1;
sockaddr_in g_children_addr;

// ReadChildsBytes accepts the connection of the child just reaped (loopback
// may queue it a little after the child's connect returned) and reads it to
// its end; true if it brought "abcd".
bool ReadChildsBytes() {
  pollfd ready = {g_children_listener, POLLIN, 0};
  if (poll(&ready, 1, 5000) != 1) return false;
  const int conn = accept(g_children_listener, nullptr, nullptr);
  if (conn < 0) return false;
  char got[8];
  size_t length = 0;
  for (ssize_t n; length < sizeof(got) && (n = read(conn, got + length, sizeof(got) - length)) != 0;) {
    if (n < 0) break;
    length += static_cast<size_t>(n);
  }
  close(conn);
  return length == 4 && memcmp(got, "abcd", 4) == 0;
}

void OnAlarm(int) {
  g_pending = 0;
  const pid_t pid = fork();
  if (pid == 0) {
    if (!g_children_write) _exit(0);
    g_in_child = 1;
    return;
  }
  if (pid > 0) {
    g_forks = g_forks + 1;
    waitpid(pid, nullptr, 0);
    if (g_children_write && !ReadChildsBytes()) g_lost = g_lost + 1;
  }
}

// WriteAndExit is a forked child's end in `write` mode.
[[noreturn]] void WriteAndExit() {
  const int conn = socket(AF_INET, SOCK_STREAM, 0);
  if (conn < 0 || connect(conn, reinterpret_cast<sockaddr*>(&g_children_addr), sizeof(g_children_addr)) != 0) {
    exit(3);
  }
  write(conn, "ab", 2);
  write(conn, "cd", 2);
  exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  g_children_write = argc > 1 && strcmp(argv[1], "write") == 0;
  sockaddr_in addr;
  const int listener = ListenOnLoopback(&addr);
  if (listener < 0) return 2;
  if (g_children_write) {
    g_children_listener = ListenOnLoopback(&g_children_addr);
    if (g_children_listener < 0) return 2;
    fcntl(listener, F_SETFL, O_NONBLOCK);
    fcntl(g_children_listener, F_SETFL, O_NONBLOCK);
  }
  OnSignal(SIGALRM, OnAlarm);
  const itimerval once = {{0, 0}, {0, 300}};
  const long rounds = RoundsFor(2000, [&] {
    if (g_in_child) WriteAndExit();
    if (!g_pending) {
      g_pending = 1;
      setitimer(ITIMER_REAL, &once, nullptr);
    }
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    const int server = accept(listener, nullptr, nullptr);
    write(client, "x", 1);
    char c;
    if (g_children_write) {
      recv(server, &c, 1, MSG_DONTWAIT);
    } else {
      read(server, &c, 1);
    }
    close(client);
    if (server >= 0) close(server);
  });
  // No child after this one: it would print the parent's line.
  signal(SIGALRM, SIG_IGN);
  if (g_in_child) WriteAndExit();
  printf("done %ld forks %d lost %d\n", rounds, static_cast<int>(g_forks), static_cast<int>(g_lost));
  return 0;
}
