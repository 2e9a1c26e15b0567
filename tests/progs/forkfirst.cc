// forkfirst: a thread forks while another opens the process's first TCP
// socket, when the shim sets its private heap up (issue 16: the heap is set
// up at the first socket, not at load). Each child opens a socket of its
// own and exits; the parent waits for every child. Prints "ok" unless a
// child failed; a fork that deadlocks with the heap's set-up hangs instead.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

constexpr int kForks = 20;
pthread_barrier_t g_start;

void* Forker(void*) {
  pthread_barrier_wait(&g_start);
  for (int i = 0; i < kForks; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(socket(AF_INET, SOCK_STREAM, 0));
      _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0) {
      fprintf(stderr, "forkfirst: child %d ended with status %d\n", i, status);
      exit(1);
    }
  }
  return nullptr;
}

}  // namespace

int main() {
  pthread_barrier_init(&g_start, nullptr, 2);
  pthread_t forker;
  if (pthread_create(&forker, nullptr, Forker, nullptr) != 0) return 1;
  pthread_barrier_wait(&g_start);
  for (int i = 0; i < kForks; ++i) close(socket(AF_INET, SOCK_STREAM, 0));
  pthread_join(forker, nullptr);
  puts("ok");
  return 0;
}
