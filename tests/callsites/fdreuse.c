/* A program that closes every fd it did not open (closefrom(3)) and then
   reuses the lowest numbers for its sockets, several times over: a client
   socket, a listener and the accepted socket, in one thread. Each round the
   client sends messages of 1 to 64 bytes, every byte known, the server side
   checks each byte and answers with the message's number, which the client
   checks. Any byte taken, added or changed by someone else on these fds
   (libunwind's pipe had these numbers before closefrom) ends it with exit 1
   and a message; a read that would hang times out after 10 s instead. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int fail(const char* what, int round, int message) {
  fprintf(stderr, "fdreuse: %s (round %d, message %d)\n", what, round, message);
  return 1;
}

/* read_exactly reads n bytes or fails. */
static int read_exactly(int fd, unsigned char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r <= 0) return 0;
    got += (size_t)r;
  }
  return 1;
}

__attribute__((noinline)) static int send_message(int fd, const unsigned char* buf, size_t n) {
  return write(fd, buf, n) == (ssize_t)n; /* message-write */
}

/* send_deep calls send_message under depth frames of 3 KiB each: the
   unwinder reads frames on more stack pages than it remembers as checked
   (libunwind 1.6.2 keeps 4), so it checks addresses again on each write. */
__attribute__((noinline)) static int send_deep(int fd, const unsigned char* buf, size_t n, int depth) {
  volatile char pad[3072];
  pad[0] = (char)depth;
  if (depth > 0) return send_deep(fd, buf, n, depth - 1) + pad[0] - depth;
  return send_message(fd, buf, n);
}

__attribute__((noinline)) static int send_answer(int fd, unsigned int number) {
  return send(fd, &number, sizeof(number), 0) == (ssize_t)sizeof(number); /* answer-write */
}

static int round_trip(int round, int messages) {
  closefrom(3);
  int client = socket(AF_INET, SOCK_STREAM, 0);  /* fd 3 */
  int listener = socket(AF_INET, SOCK_STREAM, 0);  /* fd 4 */
  if (client != 3 || listener != 4) return fail("fds 3 and 4 were not reused", round, 0);
  struct sockaddr_in a = {0};
  socklen_t len = sizeof(a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr*)&a, sizeof(a)) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, (struct sockaddr*)&a, &len) != 0 || connect(client, (struct sockaddr*)&a, sizeof(a)) != 0) {
    return fail("no connection", round, 0);
  }
  int server = accept(listener, NULL, NULL);
  struct timeval timeout = {10, 0};
  setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(server, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  for (int m = 0; m < messages; ++m) {
    unsigned char out[64], in[64];
    const size_t n = 1 + (size_t)(m * 7 + round) % 64;
    for (size_t i = 0; i < n; ++i) out[i] = (unsigned char)(m * 31 + round * 17 + i);
    if (!send_deep(client, out, n, m % 8)) return fail("client write failed", round, m);
    if (!read_exactly(server, in, n)) return fail("server read failed or timed out", round, m);
    if (memcmp(in, out, n) != 0) return fail("server got other bytes", round, m);
    if (!send_answer(server, (unsigned int)m)) return fail("server write failed", round, m);
    unsigned int answer = 0;
    if (!read_exactly(client, (unsigned char*)&answer, sizeof(answer))) return fail("client read failed", round, m);
    if (answer != (unsigned int)m) return fail("client got another answer", round, m);
  }
  /* Nothing more may arrive on either side. */
  unsigned char extra;
  shutdown(client, SHUT_WR);
  if (read(server, &extra, 1) != 0) return fail("server got a byte it was not sent", round, messages);
  shutdown(server, SHUT_WR);
  if (read(client, &extra, 1) != 0) return fail("client got a byte it was not sent", round, messages);
  close(server);
  return 0;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 3;
  const int messages = argc > 2 ? atoi(argv[2]) : 200;
  for (int r = 0; r < rounds; ++r) {
    if (round_trip(r, messages) != 0) return 1;
  }
  printf("fdreuse: %d rounds of %d messages intact\n", rounds, messages);
  return 0;
}
