// A program that links the shim (pkg-config --libs tcpadvise) instead of
// preloading it: three 4-byte writes over a loopback connection to itself.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  if (bind(listener, (struct sockaddr *)&addr, len) || listen(listener, 1) ||
      getsockname(listener, (struct sockaddr *)&addr, &len)) return 1;
  int client = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(client, (struct sockaddr *)&addr, len)) return 1;
  int server = accept(listener, 0, 0);
  char buf[8];
  for (int i = 0; i < 3; i++) {
    if (write(client, "ping", 4) != 4 || read(server, buf, sizeof buf) != 4) return 1;
  }
  close(client); close(server); close(listener);
  return 0;
}
