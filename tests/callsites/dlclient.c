/* A client whose requests are written by a dlopen'ed library (argv[3]). */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  void* plugin = dlopen(argv[3], RTLD_NOW);
  if (plugin == NULL) return 3;
  int (*write_request)(int, int) = (int (*)(int, int))dlsym(plugin, "plugin_write_request");
  if (write_request == NULL) return 3;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(argv[1]));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr*)&a, sizeof(a)) != 0) return 1;
  for (int i = 0; i < atoi(argv[2]); ++i) {
    char reply;
    if (!write_request(fd, i) || read(fd, &reply, 1) != 1) return 1;
  }
  close(fd);
  return 0;
}
