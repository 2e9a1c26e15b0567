/* A client whose write is in a function the compiler inlines into its
   caller (always_inline): DWARF names both, the inlined one innermost. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static inline __attribute__((always_inline)) int put_frame(int fd, const char* buf, size_t n) {
  return write(fd, buf, n) == (ssize_t)n; /* inlined-write */
}

__attribute__((noinline)) static int send_request(int fd) {
  char request[40];
  memset(request, 'q', sizeof(request));
  return put_frame(fd, request, sizeof(request)); /* inlined-call */
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(argv[1]));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr*)&a, sizeof(a)) != 0) return 1;
  for (int i = 0; i < atoi(argv[2]); ++i) {
    char reply;
    if (!send_request(fd) || read(fd, &reply, 1) != 1) return 1;
  }
  close(fd);
  return 0;
}
