// Coalesce: the coalescing buffer of a socket's policy. Small writes are
// copied into it and reported as written; the bytes leave in one send when
// the buffer fills, at a read or wait, at the deadline, or before any call
// that must follow them. Every function here runs with p's turn held.
#ifndef TCPADVISE_COALESCE_H_
#define TCPADVISE_COALESCE_H_

#include <sys/types.h>
#include <sys/uio.h>

#include "held_set.h"
#include "policy_state.h"

namespace tcpadvise {

// kMaxHeldIovecs bounds the iovecs a held write may have; a write with more
// passes through after what is held.
constexpr int kMaxHeldIovecs = 64;

// EnsureBuffer allocates p's buffer (capacity: the rule's max_bytes, or the
// socket's MSS); false when memory ran out.
bool AllocateBuffer(PolicyState* p, int fd);
inline bool EnsureBuffer(PolicyState* p, int fd) { return p->buffer != nullptr || AllocateBuffer(p, fd); }

// Append copies the application's bytes after what p holds; false, holding
// nothing more, when some of them cannot be read (the kernel must answer
// EFAULT, so the call passes through).
bool Append(PolicyState* p, const iovec* iov, int iovcnt);

// Flush sends what p holds without a SIGPIPE; on a socket that must not
// block it sends what the kernel takes and keeps the rest for later (false).
// An error other than EAGAIN drops the bytes and is kept for the socket's
// next write.
bool Flush(PolicyState* p, int fd, FlushCause cause, bool may_block);

// FlushForExit sends what p holds even on a non-blocking socket, waiting for
// room up to about 5 s: the process is about to lose the bytes otherwise.
void FlushForExit(PolicyState* p, int fd, FlushCause cause);

// DrainOverflow moves what signal handlers wrote into the held bytes (or
// sends it with them), in order, once every reservation is copied. Inline:
// every turn looks, and nearly never finds anything.
void DrainOverflowSlow(PolicyState* p);
inline void DrainOverflow(PolicyState* p) {
  if (__builtin_expect(p->overflow_length.load(std::memory_order_acquire) != p->overflow_drained, 0)) {
    DrainOverflowSlow(p);
  }
}

// SignalWrite queues a signal handler's write behind what p holds, for a
// handler that interrupted its thread inside the shim; beyond the overflow
// buffer's room it writes directly.
ssize_t SignalWrite(PolicyState* p, const iovec* iov, int iovcnt, ssize_t (*passthrough)(void*), void* context);

// HeldNow appends an application write to what p holds when it fits and
// nothing calls for the kernel (the common case, inline); false otherwise,
// holding nothing more: CoalesceWrite then decides.
inline bool HeldNow(PolicyState* p, const iovec* iov, int iovcnt, size_t n, bool nonblocking) {
  return p->pending_errno == 0 && iovcnt > 0 && iovcnt <= kMaxHeldIovecs && p->buffer != nullptr && n != 0 &&
         n <= p->capacity && p->held.load(std::memory_order_relaxed) + n <= p->capacity &&
         (!nonblocking || p->nonblocking_ok) && !p->write_shutdown.load(std::memory_order_relaxed) &&
         HeldSetHasRoom(p) && Append(p, iov, iovcnt);
}

// ReleaseIfFull sends what p holds once it fills the buffer (max_bytes, one
// segment by default) rather than at the next read, wait or write: a full
// segment gains nothing from waiting, and the program may compute a while
// before its next call. On a socket that must not block, what the kernel
// has no room for stays held for the deadline thread.
void ReleaseFullSlow(PolicyState* p, int fd, bool nonblocking);
inline void ReleaseIfFull(PolicyState* p, int fd, bool nonblocking) {
  if (__builtin_expect(p->held.load(std::memory_order_relaxed) >= p->capacity, 0)) ReleaseFullSlow(p, fd, nonblocking);
}

// CoalesceWrite runs one application write under coalesce.
ssize_t CoalesceWrite(PolicyState* p, int fd, const iovec* iov, int iovcnt, int flags, bool special,
                      ssize_t (*passthrough)(void*), void* context);

// FreeBuffers frees p's buffers.
void FreeBuffers(PolicyState* p);

}  // namespace tcpadvise

#endif  // TCPADVISE_COALESCE_H_
