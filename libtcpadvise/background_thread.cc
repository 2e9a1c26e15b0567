#include "background_thread.h"

#include <pthread.h>
#include <signal.h>

#include "errno_saver.h"

namespace tcpadvise {

bool StartBackgroundThread(void* (*loop)(void*), size_t stack_size) {
  ErrnoSaver errno_saver;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, stack_size);
  pthread_t thread;
  const bool started = pthread_create(&thread, &attr, loop, nullptr) == 0;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return started;
}

}  // namespace tcpadvise
