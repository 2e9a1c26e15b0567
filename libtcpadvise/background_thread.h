// BackgroundThread: the shim's own threads (snapshots, policy deadlines), and
// whether the application itself runs more than one thread.
#ifndef TCPADVISE_BACKGROUND_THREAD_H_
#define TCPADVISE_BACKGROUND_THREAD_H_

#include <pthread.h>
#include <stddef.h>

namespace tcpadvise {

// StartBackgroundThread runs loop on a detached thread with a small stack
// and every signal blocked, so the application's signals keep going to its
// own threads; false if it could not start. It returns once the thread
// runs loop (a fork right after finds no allocator halfway through the
// thread's start-up). In a single-threaded application the shim's hot calls
// then bypass glibc's cancellation bookkeeping (SetDirectCalls), which
// this thread would switch on. stack_size 0 takes the default size.
// name (at most 5 characters) follows "tcpadvise-" in the thread's name.
bool StartBackgroundThread(void* (*loop)(void*), size_t stack_size, const char* name);

// ThreadStartSafe tells whether this thread may start a shim thread now:
// not from the application's signal handler, nor inside pthread_create
// (which takes libc's locks and allocates).
bool ThreadStartSafe();

// StartApplicationThread is the pthread_create wrapper: the application
// runs threads from now on (NoteApplicationThread).
int StartApplicationThread(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg);

// ExitIfApplicationGone ends the process, as the last application thread's
// pthread_exit would have, once every application thread has exited: the
// shim's threads must not keep it alive (they block every signal, so it
// could not even be stopped with SIGTERM). Cheap while the main thread
// lives; the shim's threads call it about once a second.
void ExitIfApplicationGone();

// NoteApplicationThread records that the application starts or cancels a
// thread (the pthread_create and pthread_cancel wrappers; a shim thread
// starting does not count): from then on every call goes through glibc,
// cancellation points and all.
void NoteApplicationThread();

}  // namespace tcpadvise

#endif  // TCPADVISE_BACKGROUND_THREAD_H_
