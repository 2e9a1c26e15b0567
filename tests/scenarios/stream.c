// stream: a one-way bulk transfer, the streaming patterns of seed 003. The
// receiver takes one connection and reads it to the end; the sender writes
// fixed-size buffers for a while, with the options a test asks for. What
// the shim should find depends only on those options:
//   --size 64 --nodelay --gap-us 20   small-writes-nodelay (paced like a
//                                     feed, so each write leaves alone)
//   --size 65536 --sndbuf 4096        sndbuf-limited
//   --size 65536                      healthy: large writes, Nagle on, autotuning
//
//   stream receive [--host ADDR] [--port P] [--read-size BYTES]
//   stream send --port P [--host ADDR] [--size BYTES] [--seconds S]
//               [--max-bytes N] [--gap-us US] [--nodelay] [--sndbuf BYTES]
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// Either side gives up after this long, so a test never hangs on it.
enum { kWatchdogSeconds = 30 };

struct options {
  const char *mode;
  const char *host;
  int port;
  long size;
  double seconds;
  long long max_bytes;
  int nodelay;
  int sndbuf;
  long gap_us;
  long read_size;
};

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void usage(void) {
  fprintf(stderr,
          "usage: stream receive [--host ADDR] [--port P] [--read-size BYTES]\n"
          "       stream send --port P [--host ADDR] [--size BYTES] [--seconds S] [--max-bytes N]\n"
          "                   [--gap-us US] [--nodelay] [--sndbuf BYTES]\n");
  exit(2);
}

static struct options parse(int argc, char **argv) {
  struct options o = {.host = "127.0.0.1", .size = 65536, .seconds = 0.3, .max_bytes = 1LL << 40,
                      .read_size = 65536};
  if (argc < 2) usage();
  o.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const char *flag = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(flag, "--nodelay") == 0) {
      o.nodelay = 1;
      continue;
    }
    if (value == NULL) usage();
    ++i;
    if (strcmp(flag, "--host") == 0) o.host = value;
    else if (strcmp(flag, "--port") == 0) o.port = atoi(value);
    else if (strcmp(flag, "--size") == 0) o.size = atol(value);
    else if (strcmp(flag, "--seconds") == 0) o.seconds = atof(value);
    else if (strcmp(flag, "--max-bytes") == 0) o.max_bytes = atoll(value);
    else if (strcmp(flag, "--gap-us") == 0) o.gap_us = atol(value);
    else if (strcmp(flag, "--sndbuf") == 0) o.sndbuf = atoi(value);
    else if (strcmp(flag, "--read-size") == 0) o.read_size = atol(value);
    else usage();
  }
  if (strcmp(o.mode, "send") != 0 && strcmp(o.mode, "receive") != 0) usage();
  if (o.size <= 0 || o.read_size <= 0) usage();
  return o;
}

static struct sockaddr_in address(const struct options *o) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)o->port)};
  if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1) usage();
  return addr;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int receive(const struct options *o) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) die("socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in addr = address(o);
  if (bind(listener, (struct sockaddr *)&addr, sizeof(addr)) != 0) die("bind");
  if (listen(listener, 1) != 0) die("listen");
  socklen_t length = sizeof(addr);
  getsockname(listener, (struct sockaddr *)&addr, &length);
  printf("listening %d\n", ntohs(addr.sin_port));
  fflush(stdout);
  int fd = accept(listener, NULL, NULL);
  if (fd < 0) die("accept");
  char *buffer = malloc((size_t)o->read_size);
  if (buffer == NULL) die("malloc");
  long long total = 0;
  ssize_t got;
  while ((got = read(fd, buffer, (size_t)o->read_size)) > 0) total += got;
  if (got < 0) die("read");
  close(fd);
  close(listener);
  free(buffer);
  printf("{\"received\": %lld, \"pid\": %d}\n", total, getpid());
  return 0;
}

static int send_stream(const struct options *o) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  if (o->nodelay) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  if (o->sndbuf > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &o->sndbuf, sizeof(o->sndbuf));
  struct sockaddr_in addr = address(o);
  if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) die("connect");
  char *buffer = malloc((size_t)o->size);
  if (buffer == NULL) die("malloc");
  memset(buffer, 's', (size_t)o->size);
  long long writes = 0, bytes = 0;
  const double deadline = now_seconds() + o->seconds;
  while (bytes < o->max_bytes && now_seconds() < deadline) {
    ssize_t put = write(fd, buffer, (size_t)o->size);
    if (put <= 0) die("write");
    bytes += put;
    ++writes;
    if (o->gap_us > 0) {
      struct timespec gap = {.tv_sec = o->gap_us / 1000000, .tv_nsec = (o->gap_us % 1000000) * 1000};
      nanosleep(&gap, NULL);
    }
  }
  close(fd);
  free(buffer);
  printf("{\"writes\": %lld, \"bytes\": %lld, \"pid\": %d}\n", writes, bytes, getpid());
  return 0;
}

int main(int argc, char **argv) {
  struct options o = parse(argc, argv);
  alarm(kWatchdogSeconds);
  return strcmp(o.mode, "send") == 0 ? send_stream(&o) : receive(&o);
}
