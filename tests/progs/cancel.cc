// cancel: pthread cancellation must still interrupt a read the shim wraps,
// also after a cork or coalesce policy started the shim's deadline thread.
// The program connects to a listener of its own that never sends, writes
// two bytes (a policy holds them and starts its thread), then:
//   cancel thread  a second thread blocks in read(); the main thread cancels
//                  it and joins it
//   cancel self    the main thread cancels itself, then blocks in read(); the
//                  cancellation must act there
//   cancel exit    the main thread calls pthread_exit: the process must end
//                  with status 0, the shim's thread or not
// Prints "cancelled" when the cancellation acted; a read that is not a
// cancellation point blocks forever instead.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "progs.h"

namespace {

int g_fd = -1;

void* BlockInRead(void*) {
  char byte;
  (void)read(g_fd, &byte, 1);
  return nullptr;
}

void ReportCancelled(void*) {
  printf("cancelled\n");
  fflush(stdout);
  _exit(0);
}

// ConnectedPair returns a client socket connected to a listener that never sends.
int ConnectedPair(int* accepted) {
  sockaddr_in addr;
  const int listener = ListenOnLoopback(&addr, 1);
  if (listener < 0) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  *accepted = accept(listener, nullptr, nullptr);
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  const bool self = argc == 2 && strcmp(argv[1], "self") == 0;
  const bool exit_main = argc == 2 && strcmp(argv[1], "exit") == 0;
  if (argc != 2 || (!self && !exit_main && strcmp(argv[1], "thread") != 0)) {
    fprintf(stderr, "usage: cancel thread|self|exit\n");
    return 2;
  }
  int accepted = -1;
  g_fd = ConnectedPair(&accepted);
  if (g_fd < 0 || accepted < 0 || write(g_fd, "hi", 2) != 2) {
    perror("cancel: setup");
    return 1;
  }
  if (exit_main) pthread_exit(nullptr);
  if (self) {
    pthread_cleanup_push(ReportCancelled, nullptr);
    pthread_cancel(pthread_self());
    char byte;
    (void)read(g_fd, &byte, 1);
    pthread_cleanup_pop(0);
    printf("not cancelled\n");
    return 1;
  }
  pthread_t reader;
  pthread_create(&reader, nullptr, BlockInRead, nullptr);
  usleep(100 * 1000);  // let it block
  pthread_cancel(reader);
  void* outcome = nullptr;
  pthread_join(reader, &outcome);
  printf(outcome == PTHREAD_CANCELED ? "cancelled\n" : "not cancelled\n");
  return outcome == PTHREAD_CANCELED ? 0 : 1;
}
