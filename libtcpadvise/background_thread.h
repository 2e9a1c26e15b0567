// BackgroundThread: the shim's own threads (snapshots, policy deadlines).
#ifndef TCPADVISE_BACKGROUND_THREAD_H_
#define TCPADVISE_BACKGROUND_THREAD_H_

#include <stddef.h>

namespace tcpadvise {

// StartBackgroundThread runs loop on a detached thread with a small stack
// and every signal blocked, so the application's signals keep going to its
// own threads; false if it could not start.
bool StartBackgroundThread(void* (*loop)(void*), size_t stack_size);

}  // namespace tcpadvise

#endif  // TCPADVISE_BACKGROUND_THREAD_H_
