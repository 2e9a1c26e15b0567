/* A client whose requests are written by two named functions: a header
   writer and a body writer, then it reads the one-byte reply. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

__attribute__((noinline)) static int write_header(int fd, int n) {
  char header[8];
  memset(header, 'h', sizeof(header));
  header[0] = (char)n;
  return write(fd, header, sizeof(header)) == (ssize_t)sizeof(header); /* header-write */
}

__attribute__((noinline)) static int write_body(int fd) {
  char body[32];
  memset(body, 'b', sizeof(body));
  return send(fd, body, sizeof(body), 0) == (ssize_t)sizeof(body); /* body-write */
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(argv[1]));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr*)&a, sizeof(a)) != 0) return 1;
  int requests = atoi(argv[2]);
  for (int i = 0; i < requests; ++i) {
    char reply;
    if (!write_header(fd, i) || !write_body(fd) || read(fd, &reply, 1) != 1) return 1;
  }
  close(fd);
  return 0;
}
