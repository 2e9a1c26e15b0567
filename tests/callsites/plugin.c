/* A shared library the client loads with dlopen: it writes whole requests. */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

__attribute__((noinline)) int plugin_write_request(int fd, int n) {
  char request[40];
  memset(request, 'p', sizeof(request));
  request[0] = (char)n;
  return write(fd, request, 8) == 8 && write(fd, request + 8, 32) == 32; /* plugin-write */
}
