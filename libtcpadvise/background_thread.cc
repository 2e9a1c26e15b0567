#include "background_thread.h"

#include <pthread.h>
#include <signal.h>
#include <sys/single_threaded.h>

#include <atomic>

#include "errno_saver.h"
#include "real_libc.h"

namespace tcpadvise {

namespace {

// g_only_shim_threads: the process was single-threaded when the shim started
// its first thread, and the application has started or cancelled none since.
std::atomic<bool> g_only_shim_threads{false};
std::atomic<bool> g_application_threads{false};
// Set while this thread starts a shim thread: the pthread_create wrapper is
// in the way (after any sanitizer's, which must see every thread).
thread_local bool t_starting_shim_thread = false;

}  // namespace

bool StartBackgroundThread(void* (*loop)(void*), size_t stack_size) {
  ErrnoSaver errno_saver;
  // glibc keeps __libc_single_threaded false once any thread was started.
  if (__libc_single_threaded && !g_application_threads.load(std::memory_order_relaxed)) {
    g_only_shim_threads.store(true, std::memory_order_relaxed);
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, stack_size);
  pthread_t thread;
  t_starting_shim_thread = true;
  const bool started = pthread_create(&thread, &attr, loop, nullptr) == 0;
  t_starting_shim_thread = false;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (started && g_only_shim_threads.load(std::memory_order_relaxed)) {
    g_real.direct.store(true, std::memory_order_relaxed);
  }
  return started;
}

bool ApplicationSingleThreaded() {
  return __libc_single_threaded || g_only_shim_threads.load(std::memory_order_relaxed);
}

void NoteApplicationThread() {
  if (t_starting_shim_thread) return;
  g_application_threads.store(true, std::memory_order_relaxed);
  g_only_shim_threads.store(false, std::memory_order_relaxed);
  g_real.direct.store(false, std::memory_order_relaxed);
}

}  // namespace tcpadvise
