// churn: connects, accepts, writes, reads and closes TCP connections in a
// tight loop until a signal stops it, so that a stop signal often lands
// while the shim holds its socket table's lock or allocates: the program
// must still die of the signal, promptly, with its final trace. Prints
// "listening PORT" once the loop starts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "progs.h"

int main() {
  sockaddr_in addr;
  const int listener = ListenOnLoopback(&addr);
  if (listener < 0) return 2;
  printf("listening %d\n", ntohs(addr.sin_port));
  fflush(stdout);
  char byte = 'c';
  for (;;) {
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    const int server = accept(listener, nullptr, nullptr);
    write(client, &byte, 1);
    read(server, &byte, 1);
    close(server);
    close(client);
  }
}
