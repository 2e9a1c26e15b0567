// forkheap: forks while the shim's private heap is in use, by this thread
// only (phase 1: a fork skips jemalloc's fork handlers) and then by two more
// threads that allocate and free in it as the forks come (phase 2: the
// handlers run). The threads' and every child's exchanges write varied sizes
// over loopback TCP; under a policy that holds (the test's), each
// connection's buffers come from the heap and go back to it at its close. Each child makes one exchange of its own and
// exits (writing its trace). Prints "ok" unless a child failed; a fork that
// leaves a heap lock held hangs a child instead.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <initializer_list>

namespace {

constexpr int kWrites = 40;
std::atomic<bool> g_stop{false};

bool ReadFully(int fd, char* buf, size_t n) {
  while (n > 0) {
    const ssize_t got = read(fd, buf, n);
    if (got <= 0) return false;
    buf += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

// Exchange connects to a listener of its own and sends kWrites writes of
// varied sizes each way; false on any failure.
bool Exchange(unsigned seed) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  bool ok = listener >= 0 && client >= 0 && bind(listener, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
            listen(listener, 1) == 0 && getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
            connect(client, reinterpret_cast<sockaddr*>(&addr), len) == 0;
  const int server = ok ? accept(listener, nullptr, nullptr) : -1;
  ok = ok && server >= 0;
  char buf[1024] = {};
  for (int i = 0; ok && i < kWrites; ++i) {
    const size_t n = 1 + (static_cast<size_t>(i) * 37 + seed) % 900;
    ok = write(client, buf, n) == static_cast<ssize_t>(n) && ReadFully(server, buf, n) &&
         write(server, buf, n / 2 + 1) == static_cast<ssize_t>(n / 2 + 1) && ReadFully(client, buf, n / 2 + 1);
  }
  for (const int fd : {server, client, listener}) {
    if (fd >= 0) close(fd);
  }
  return ok;
}

void* Churn(void* arg) {
  unsigned seed = static_cast<unsigned>(reinterpret_cast<uintptr_t>(arg));
  while (!g_stop.load(std::memory_order_relaxed)) {
    if (!Exchange(seed++)) {
      fprintf(stderr, "forkheap: a thread's exchange failed\n");
      exit(1);
    }
  }
  return nullptr;
}

// Forks n children that each make an exchange and exit; false if one failed.
bool ForkChildren(int n, unsigned seed) {
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid == 0) exit(Exchange(seed + static_cast<unsigned>(i)) ? 0 : 1);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0) {
      fprintf(stderr, "forkheap: child %d ended with status %d\n", i, status);
      return false;
    }
  }
  return true;
}

}  // namespace

int main() {
  if (!Exchange(0) || !ForkChildren(20, 1)) return 1;
  pthread_t threads[2];
  for (uintptr_t i = 0; i < 2; ++i) {
    if (pthread_create(&threads[i], nullptr, Churn, reinterpret_cast<void*>(i * 1000)) != 0) return 1;
  }
  const bool ok = ForkChildren(40, 100);
  g_stop.store(true, std::memory_order_relaxed);
  for (pthread_t t : threads) pthread_join(t, nullptr);
  if (!ok) return 1;
  puts("ok");
  return 0;
}
