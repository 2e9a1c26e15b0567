#include "background_thread.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "errno_saver.h"
#include "real_libc.h"
#include "reentry.h"

namespace tcpadvise {

namespace {

// g_application_threads: the application has started or cancelled a thread.
std::atomic<bool> g_application_threads{false};
// Set while this thread starts a shim thread: the pthread_create wrapper is
// in the way (after any sanitizer's, which must see every thread).
thread_local bool t_starting_shim_thread = false;
// Set while this thread is inside pthread_create, the shim's or the
// application's: a signal handler's hook must not start one inside it.
thread_local bool t_in_pthread_create = false;

// kNamePrefix starts the name of every shim thread: ExitIfApplicationGone
// tells them from the application's by it.
constexpr char kNamePrefix[] = "tcpadvise-";

// ReadProcFile reads a small /proc file into buf (NUL-terminated); false on failure.
bool ReadProcFile(const char* path, char* buf, size_t size) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

// ThreadRuns tells whether the task whose /proc stat line is stat is an
// application thread that has not exited.
bool ThreadRuns(const char* stat) {
  const char* open_paren = strchr(stat, '(');
  const char* close_paren = strrchr(stat, ')');
  if (open_paren == nullptr || close_paren == nullptr || close_paren[1] == '\0') return true;
  const char state = close_paren[2];
  if (state == 'Z' || state == 'X') return false;
  return strncmp(open_paren + 1, kNamePrefix, sizeof(kNamePrefix) - 1) != 0;
}

bool AnyApplicationThreadRuns() {
  char stat[512];
  // The main thread first: while it runs, nothing else is read.
  if (!ReadProcFile("/proc/self/stat", stat, sizeof(stat)) || ThreadRuns(stat)) return true;
  const int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return true;
  bool runs = false;
  alignas(8) char entries[4096];
  long n;
  while (!runs && (n = syscall(SYS_getdents64, dir, entries, sizeof(entries))) > 0) {
    for (long at = 0; at < n && !runs;) {
      const auto* entry = reinterpret_cast<const dirent64*>(entries + at);
      at += entry->d_reclen;
      if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
      char path[sizeof("/proc/self/task//stat") + sizeof(entry->d_name)];
      snprintf(path, sizeof(path), "/proc/self/task/%s/stat", entry->d_name);
      runs = ReadProcFile(path, stat, sizeof(stat)) && ThreadRuns(stat);
    }
  }
  close(dir);
  return runs;
}

// ThreadStart is what a starting shim thread needs, on its creator's stack.
struct ThreadStart {
  void* (*loop)(void*);
  std::atomic<bool> running{false};
};

void* RunThread(void* arg) {
  auto* start = static_cast<ThreadStart*>(arg);
  void* (*loop)(void*) = start->loop;
  start->running.store(true, std::memory_order_release);  // start is gone after this
  return loop(nullptr);
}

}  // namespace

void ExitIfApplicationGone() {
  if (!AnyApplicationThreadRuns()) exit(0);
}

bool StartBackgroundThread(void* (*loop)(void*), size_t stack_size, const char* name) {
  ErrnoSaver errno_saver;
  // glibc keeps __libc_single_threaded false once any thread was started.
  const bool only_shim_threads = __libc_single_threaded && !g_application_threads.load(std::memory_order_relaxed);
  // The caller blocks every signal until the new thread runs, and the new
  // thread starts with that mask, so it never takes the program's signals.
  // pthread_create allocates under malloc's lock (the thread's TLS): a
  // program's handler that forked there (fork is async-signal-safe) would
  // wait in glibc's fork for that lock for ever; it runs once the mask is
  // back instead (a hang sigfork found, 1 run in some 30).
  sigset_t all, caller;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &caller);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (stack_size != 0) pthread_attr_setstacksize(&attr, stack_size);
  pthread_t thread;
  ThreadStart start;
  start.loop = loop;
  t_starting_shim_thread = true;
  t_in_pthread_create = true;
  const bool started = pthread_create(&thread, &attr, RunThread, &start) == 0;
  t_in_pthread_create = false;
  t_starting_shim_thread = false;
  if (started) {
    char full_name[16];
    snprintf(full_name, sizeof(full_name), "%s%s", kNamePrefix, name);
    pthread_setname_np(thread, full_name);
    // The new thread's start-up may allocate (glibc, a sanitizer's runtime):
    // a fork right after must not find it halfway, holding an allocator's
    // lock that the child would wait on for ever.
    while (!start.running.load(std::memory_order_acquire)) sched_yield();
  }
  pthread_sigmask(SIG_SETMASK, &caller, nullptr);
  pthread_attr_destroy(&attr);
  if (started && only_shim_threads) {
    SetDirectCalls(true);
  }
  return started;
}

bool ThreadStartSafe() { return !InApplicationSignalHandler() && !t_in_pthread_create; }

int StartApplicationThread(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  NoteApplicationThread();
  t_in_pthread_create = true;
  const int result = Real(g_real.pthread_create)(thread, attr, start, arg);
  t_in_pthread_create = false;
  return result;
}

void NoteApplicationThread() {
  if (t_starting_shim_thread) return;
  g_application_threads.store(true, std::memory_order_relaxed);
  SetDirectCalls(false);
}

}  // namespace tcpadvise
