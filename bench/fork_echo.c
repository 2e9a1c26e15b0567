// fork_echo: a fork-per-connection server and the client that loads it, the
// shape of a PostgreSQL postmaster and its backends with as little of the
// server's own work as can be: what the shim costs such a server a
// connection, in microseconds a load on the machine moves less than it
// moves PostgreSQL's 3 ms (bench/fork_echo.py runs it under
// bench/cpu_per_request.py).
//   fork_echo serve PORT: listens on 127.0.0.1:PORT; waits in poll, accepts
//     and forks a child per connection, which closes the listener, echoes
//     each request until the client's EOF and returns from main with the
//     connection open (exit runs the destructors and the kernel closes the
//     socket, as for a PostgreSQL backend); the parent closes its
//     copy and reaps children after each wait. SIGTERM ends it through exit.
//   fork_echo load PORT SECONDS [ROUND_TRIPS]: connects again and again for
//     SECONDS, each connection ROUND_TRIPS (default 3) 64-byte requests and
//     their echoes, then a close; prints "connections N in S s".
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kRequestBytes = 64 };

static volatile sig_atomic_t g_stop;

static void OnTerm(int signo) {
  (void)signo;
  g_stop = 1;
}

static struct sockaddr_in Loopback(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Echo answers each request until EOF: a backend's turns.
static int Echo(int fd) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) return 0;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 1;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = write(fd, buffer + done, (size_t)(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return 1;
      done += w;
    }
  }
}

static int Serve(int port) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  struct sockaddr_in a = Loopback(port);
  if (listener < 0 || setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(listener, (struct sockaddr*)&a, sizeof(a)) != 0 || listen(listener, 128) != 0) {
    perror("fork_echo serve");
    return 1;
  }
  struct sigaction term;
  memset(&term, 0, sizeof(term));
  term.sa_handler = OnTerm;
  sigaction(SIGTERM, &term, NULL);
  sigaction(SIGINT, &term, NULL);
  while (!g_stop) {
    struct pollfd p = {listener, POLLIN, 0};
    const int ready = poll(&p, 1, 1000);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    if (ready <= 0) continue;
    struct sockaddr_in peer;
    socklen_t length = sizeof(peer);
    const int fd = accept(listener, (struct sockaddr*)&peer, &length);
    if (fd < 0) continue;
    const pid_t child = fork();
    if (child == 0) {
      // The connection stays open to the end, as a PostgreSQL backend
      // leaves its socket for the kernel to close at exit.
      close(listener);
      return Echo(fd);
    }
    close(fd);
  }
  return 0;
}

static double Seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

// RoundTrip sends one request and reads its whole echo.
static int RoundTrip(int fd) {
  char request[kRequestBytes], reply[kRequestBytes];
  memset(request, 'q', sizeof(request));
  if (write(fd, request, sizeof(request)) != (ssize_t)sizeof(request)) return 1;
  for (size_t got = 0; got < sizeof(reply);) {
    const ssize_t n = read(fd, reply + got, sizeof(reply) - got);
    if (n <= 0) return 1;
    got += (size_t)n;
  }
  return 0;
}

static int Load(int port, double seconds, int round_trips) {
  const double start = Seconds(), end = start + seconds;
  long connections = 0;
  const struct sockaddr_in a = Loopback(port);
  while (Seconds() < end) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
        connect(fd, (const struct sockaddr*)&a, sizeof(a)) != 0) {
      perror("fork_echo load");
      return 1;
    }
    for (int i = 0; i < round_trips; ++i) {
      if (RoundTrip(fd) != 0) {
        fprintf(stderr, "fork_echo load: connection %ld ended early\n", connections);
        return 1;
      }
    }
    close(fd);
    ++connections;
  }
  printf("connections %ld in %.3f s\n", connections, Seconds() - start);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "serve") == 0) return Serve(atoi(argv[2]));
  if (argc >= 4 && strcmp(argv[1], "load") == 0) {
    return Load(atoi(argv[2]), atof(argv[3]), argc >= 5 ? atoi(argv[4]) : 3);
  }
  fprintf(stderr, "usage: fork_echo serve PORT | fork_echo load PORT SECONDS [ROUND_TRIPS]\n");
  return 2;
}
