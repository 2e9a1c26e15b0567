// conn_holder: holds many open TCP connections on loopback, for
// bench/memory_per_connection.py.
//
//   conn_holder server PORT COUNT ROUNDS [SIZES]
//     listens on 127.0.0.1:PORT (0: any free port, printed as "listening
//     PORT"), accepts COUNT connections and serves ROUNDS request/response
//     rounds on each (a 64-byte request, a 512-byte reply; after the last a
//     non-blocking read that meets EAGAIN, as an event-loop server does),
//     prints "ready", and keeps every connection open until stdin closes.
//     SIZES "varied": each round's request is 16 B to 2 KiB and its reply
//     64 B to 16 KiB, log-uniform, drawn from the connection's and the
//     round's number (both sides draw the same), so that a connection's
//     size histograms use many buckets as a real server's do.
//   conn_holder client PORT COUNT ROUNDS SOURCE_ADDR [SIZES]
//     opens COUNT connections from SOURCE_ADDR (each source address has its
//     own ephemeral ports), runs the rounds on each, prints "ready" and holds
//     them until stdin closes.
//
// Both raise RLIMIT_NOFILE's soft limit to the hard one first.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static void Die(const char* what) {
  fprintf(stderr, "conn_holder: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void RaiseFdLimit(long count) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) Die("getrlimit");
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) Die("setrlimit");
  if ((rlim_t)count + 16 > limit.rlim_cur) {
    fprintf(stderr, "conn_holder: %ld connections need more fds than RLIMIT_NOFILE allows (%lu)\n", count,
            (unsigned long)limit.rlim_cur);
    exit(1);
  }
}

static void Exactly(int fd, char* buf, size_t n, int reading) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = reading ? read(fd, buf + done, n - done) : write(fd, buf + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) Die(reading ? "read" : "write");
    done += (size_t)r;
  }
}

static void Hold(void) {
  printf("ready\n");
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
}

static char g_request[2048], g_reply[16384];
static int g_varied;

// Draw is a deterministic size in [1 << low_bits, 1 << high_bits), log-uniform.
static size_t Draw(long connection, int round, unsigned salt, int low_bits, int high_bits) {
  uint64_t h = (uint64_t)connection * 0x9e3779b97f4a7c15u ^ (uint64_t)round * 0xbf58476d1ce4e5b9u ^ salt;
  h ^= h >> 31;
  h *= 0x94d049bb133111ebu;
  h ^= h >> 29;
  const int bits = low_bits + (int)(h % (uint64_t)(high_bits - low_bits));
  return ((size_t)1 << bits) + (size_t)((h >> 8) % ((uint64_t)1 << bits));
}

static size_t RequestSize(long connection, int round) {
  return g_varied ? Draw(connection, round, 1, 4, 11) : 64;
}

static size_t ReplySize(long connection, int round) {
  return g_varied ? Draw(connection, round, 2, 6, 14) : 512;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: conn_holder server PORT COUNT ROUNDS [SIZES] | client PORT COUNT ROUNDS SOURCE_ADDR [SIZES]\n");
    return 2;
  }
  const int server = strcmp(argv[1], "server") == 0;
  const int port = atoi(argv[2]);
  const long count = atol(argv[3]);
  const int rounds = atoi(argv[4]);
  const char* sizes = argc > (server ? 5 : 6) ? argv[server ? 5 : 6] : "fixed";
  g_varied = strcmp(sizes, "varied") == 0;
  RaiseFdLimit(count);
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int one = 1;
  if (server) {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) Die("socket");
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(listener, (struct sockaddr*)&addr, sizeof(addr)) != 0) Die("bind");
    if (listen(listener, 4096) != 0) Die("listen");
    socklen_t len = sizeof(addr);
    getsockname(listener, (struct sockaddr*)&addr, &len);
    printf("listening %d\n", ntohs(addr.sin_port));
    fflush(stdout);
    for (long i = 0; i < count; ++i) {
      const int fd = accept(listener, NULL, NULL);
      if (fd < 0) Die("accept");
      for (int r = 0; r < rounds; ++r) {
        Exactly(fd, g_request, RequestSize(i, r), 1);
        Exactly(fd, g_reply, ReplySize(i, r), 0);
      }
      // The client sends nothing after its last round.
      if (recv(fd, g_request, sizeof(g_request), MSG_DONTWAIT) >= 0 || errno != EAGAIN) Die("recv");
    }
    Hold();
    return 0;
  }
  if (argc < 6) Die("client needs SOURCE_ADDR");
  struct sockaddr_in source;
  memset(&source, 0, sizeof(source));
  source.sin_family = AF_INET;
  if (inet_pton(AF_INET, argv[5], &source.sin_addr) != 1) Die("SOURCE_ADDR");
  for (long i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) Die("socket");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (bind(fd, (struct sockaddr*)&source, sizeof(source)) != 0) Die("bind");
    if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0) Die("connect");
    for (int r = 0; r < rounds; ++r) {
      Exactly(fd, g_request, RequestSize(i, r), 0);
      Exactly(fd, g_reply, ReplySize(i, r), 1);
    }
  }
  Hold();
  return 0;
}
