#include "coalesce.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "errno_saver.h"
#include "held_set.h"
#include "private_alloc.h"
#include "real_libc.h"
#include "user_memory.h"

namespace tcpadvise {
namespace {

// kOverflowCapacity bounds what signal handlers may write while their thread
// is inside the shim for the same socket; beyond it they write directly.
constexpr uint32_t kOverflowCapacity = 65536;

size_t IovecBytes(const iovec* iov, int iovcnt) {
  size_t n = 0;
  for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
  return n;
}

void NoteHoldEnded(PolicyState* p, FlushCause cause) { NoteReleased(p, cause, p->hold_start); }

void Consume(PolicyState* p, size_t sent) {
  const uint32_t held = p->held.load(std::memory_order_relaxed);
  memmove(p->buffer, p->buffer + sent, held - sent);
  p->held.store(held - static_cast<uint32_t>(sent), std::memory_order_relaxed);
}

// SendHeldThen sends the held bytes followed by the application's in one
// sendmsg, looping on a blocking socket until the held part is out. Returns
// the application's bytes sent, or -1 with errno. EFAULT means the
// application's part went nowhere (its buffer, or no room left after the
// held part): the caller sends what is still held alone, then passes the
// call through for the kernel's own answer.
ssize_t SendHeldThen(PolicyState* p, int fd, const iovec* iov, int iovcnt, int flags, bool nonblocking) {
  iovec parts[kMaxHeldIovecs + 1];
  const size_t app_bytes = IovecBytes(iov, iovcnt);
  for (;;) {
    if (p->orphaned.load(std::memory_order_relaxed)) {
      // Another thread closed the socket meanwhile; fd may be another file now.
      errno = EBADF;
      return -1;
    }
    if (HoldsParentsBytes(p)) {
      // A fork child's copy of a write cut by its fork: the parent sends both parts.
      p->held.store(0, std::memory_order_relaxed);
      return static_cast<ssize_t>(app_bytes);
    }
    const uint32_t held = p->held.load(std::memory_order_relaxed);
    parts[0] = {p->buffer, held};
    memcpy(parts + 1, iov, sizeof(iovec) * static_cast<size_t>(iovcnt));
    msghdr msg{};
    msg.msg_iov = held ? parts : parts + 1;
    msg.msg_iovlen = static_cast<size_t>(iovcnt) + (held ? 1 : 0);
    p->lock.SetBlocking(!nonblocking);
    const ssize_t sent = LibcSendmsg(fd, &msg, flags | (nonblocking ? MSG_DONTWAIT : 0));
    p->lock.SetBlocking(false);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) p->nonblocking_ok = false;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != EFAULT && held != 0) {
        // The connection is gone: the held bytes go with it, and this call reports why.
        CountersOf(p).deferred_errors.Add(ErrnoSlot(errno), 1);
        NoteHoldEnded(p, FlushCause::kLimit);
        p->held.store(0, std::memory_order_relaxed);
      }
      return -1;
    }
    if (static_cast<size_t>(sent) >= held) {
      if (held != 0) NoteHoldEnded(p, FlushCause::kLimit);
      p->held.store(0, std::memory_order_relaxed);
      p->nonblocking_ok = static_cast<size_t>(sent) - held == app_bytes;
      const ssize_t app_sent = sent - static_cast<ssize_t>(held);
      if (app_sent == 0 && app_bytes != 0) {
        // Full, interrupted or a bad buffer: the caller makes the
        // application's call again, now that nothing is held before it.
        errno = EFAULT;
        return -1;
      }
      return app_sent;
    }
    Consume(p, static_cast<size_t>(sent));
    if (nonblocking) {
      p->nonblocking_ok = false;
      errno = EAGAIN;
      return -1;
    }
  }
}

// PassAfterHeld sends what p holds, then makes the application's call as it is.
ssize_t PassAfterHeld(PolicyState* p, int fd, bool nonblocking, ssize_t (*passthrough)(void*), void* context) {
  if (p->held.load(std::memory_order_relaxed) != 0) {
    if (!Flush(p, fd, FlushCause::kPassthrough, !nonblocking)) {
      errno = EAGAIN;
      return -1;
    }
    if (!HoldsSomething(p)) RemoveFromHeldSet(p);
  }
  p->lock.SetBlocking(!nonblocking);
  const ssize_t result = passthrough(context);
  p->lock.SetBlocking(false);
  return result;
}

}  // namespace

bool AllocateBuffer(PolicyState* p, int fd) {
  uint32_t capacity = p->settings->coalesce_max_bytes;
  if (capacity == 0) {
    int mss = 0;
    socklen_t len = sizeof(mss);
    capacity = getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) == 0 && mss > 0 ? static_cast<uint32_t>(mss) : 1448;
  }
  p->buffer = static_cast<char*>(PrivateAlloc(capacity));
  p->overflow = static_cast<char*>(PrivateAlloc(kOverflowCapacity));
  if (p->buffer == nullptr || p->overflow == nullptr) {
    FreeBuffers(p);
    return false;
  }
  p->capacity = capacity;
  return true;
}

void FreeBuffers(PolicyState* p) {
  PrivateFree(p->buffer);
  PrivateFree(p->overflow);
  p->buffer = p->overflow = nullptr;
  p->capacity = 0;
}

bool Append(PolicyState* p, const iovec* iov, int iovcnt) {
  const uint32_t held = p->held.load(std::memory_order_relaxed);
  uint32_t at = held;
  for (int i = 0; i < iovcnt; ++i) {
    if (!CopyFromApp(p->buffer + at, iov[i].iov_base, iov[i].iov_len)) return false;
    at += static_cast<uint32_t>(iov[i].iov_len);
  }
  if (held == 0) p->hold_start = ReadTicks();
  p->held.store(at, std::memory_order_relaxed);
  PolicyCounters& c = CountersOf(p);
  c.bytes_held.Add(at - held);
  if (at > c.max_bytes_held.Get()) c.max_bytes_held.Set(at);
  AddToHeldSet(p);
  return true;
}

bool Flush(PolicyState* p, int fd, FlushCause cause, bool may_block) {
  while (p->held.load(std::memory_order_relaxed) != 0) {
    if (HoldsParentsBytes(p)) {
      // Checked last before the send: a fork that cuts in later finds its
      // child's copy of the send made, as one inside libc's wrapper would.
      p->held.store(0, std::memory_order_relaxed);  // the parent sends them
      break;
    }
    const uint32_t held = p->held.load(std::memory_order_relaxed);
    p->lock.SetBlocking(may_block);
    const ssize_t sent = LibcSend(fd, p->buffer, held, MSG_NOSIGNAL | (may_block ? 0 : MSG_DONTWAIT));
    p->lock.SetBlocking(false);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        p->nonblocking_ok = false;
        return false;
      }
      CountersOf(p).deferred_errors.Add(ErrnoSlot(errno), 1);
      p->pending_errno = errno;
      NoteHoldEnded(p, cause);
      p->held.store(0, std::memory_order_relaxed);
      return true;
    }
    if (static_cast<uint32_t>(sent) == held) {
      NoteHoldEnded(p, cause);
      p->held.store(0, std::memory_order_relaxed);
      p->nonblocking_ok = true;
      return true;
    }
    Consume(p, static_cast<size_t>(sent));
  }
  return true;
}

void FlushForExit(PolicyState* p, int fd, FlushCause cause) {
  for (int tries = 0; tries < 50 && !Flush(p, fd, cause, false); ++tries) {
    pollfd pfd = {fd, POLLOUT, 0};
    LibcPoll(&pfd, 1, 100);
  }
}

void DrainOverflowSlow(PolicyState* p) {
  const uint32_t length = p->overflow_length.load(std::memory_order_acquire);
  if (length == p->overflow_drained || p->overflow_ready.load(std::memory_order_acquire) != length) return;
  const iovec part = {p->overflow + p->overflow_drained, length - p->overflow_drained};
  if (HoldsParentsBytes(p)) {
    // Reserved before the fork: the parent sends them.
  } else if (p->held.load(std::memory_order_relaxed) + part.iov_len > p->capacity) {
    // The handler's write was reported as accepted: send it even if that waits.
    const int fd = p->fd.load(std::memory_order_relaxed);
    Flush(p, fd, FlushCause::kLimit, true);
    for (size_t sent = 0; sent < part.iov_len;) {
      const ssize_t n = LibcSend(fd, static_cast<char*>(part.iov_base) + sent, part.iov_len - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  } else {
    Append(p, &part, 1);
  }
  p->overflow_drained = length;
  // Start the buffer over once no handler reserved more meanwhile; a
  // reservation that did stays where it is, for the next drain.
  uint32_t expected = length;
  if (p->overflow_length.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
    p->overflow_ready.fetch_sub(length, std::memory_order_acq_rel);
    p->overflow_drained = 0;
  }
}

ssize_t SignalWrite(PolicyState* p, const iovec* iov, int iovcnt, ssize_t (*passthrough)(void*), void* context) {
  const size_t n = IovecBytes(iov, iovcnt);
  uint32_t at = p->overflow_length.load(std::memory_order_acquire);
  do {
    if (p->overflow == nullptr || at + n > kOverflowCapacity) return passthrough(context);  // documented limit
  } while (!p->overflow_length.compare_exchange_weak(at, at + static_cast<uint32_t>(n), std::memory_order_acq_rel));
  // Taking no turn, the reservation withdraws the pass a holder gave or is
  // giving: this thread's next write must go behind these bytes.
  p->lock.Veto();
  bool readable = true;
  for (int i = 0; i < iovcnt; ++i) {
    // An unreadable buffer still fills its reservation (zeros would be sent):
    // it cannot be taken back once others reserved after it. The handler's
    // call gets the kernel's answer for the same buffer instead.
    if (readable && !CopyFromApp(p->overflow + at, iov[i].iov_base, iov[i].iov_len)) readable = false;
    if (!readable) memset(p->overflow + at, 0, iov[i].iov_len);
    at += static_cast<uint32_t>(iov[i].iov_len);
  }
  p->overflow_ready.fetch_add(static_cast<uint32_t>(n), std::memory_order_acq_rel);
  return readable ? static_cast<ssize_t>(n) : passthrough(context);
}

void ReleaseFullSlow(PolicyState* p, int fd, bool nonblocking) {
  ErrnoSaver errno_saver;  // the application's write succeeded whatever this flush meets
  Flush(p, fd, FlushCause::kLimit, !nonblocking);
  if (!HoldsSomething(p)) RemoveFromHeldSet(p);
}

ssize_t CoalesceWrite(PolicyState* p, int fd, const iovec* iov, int iovcnt, int flags, bool special,
                      ssize_t (*passthrough)(void*), void* context) {
  if (p->pending_errno != 0) {
    const int e = p->pending_errno;
    p->pending_errno = 0;
    // The kernel signals a write on a broken pipe; so does the write that
    // learns of it, unless the application asked for no signal.
    if (e == EPIPE && (flags & MSG_NOSIGNAL) == 0) raise(SIGPIPE);
    errno = e;
    return -1;
  }
  const bool nonblocking = p->socket->nonblocking.load(std::memory_order_relaxed) || (flags & MSG_DONTWAIT) != 0;
  if (special || p->write_shutdown.load(std::memory_order_relaxed) || iovcnt <= 0 || iovcnt > kMaxHeldIovecs ||
      !EnsureBuffer(p, fd)) {
    return PassAfterHeld(p, fd, nonblocking, passthrough, context);
  }
  const size_t n = IovecBytes(iov, iovcnt);
  const uint32_t held = p->held.load(std::memory_order_relaxed);
  if (n == 0) return PassAfterHeld(p, fd, nonblocking, passthrough, context);
  if (n <= p->capacity && held + n <= p->capacity && (!nonblocking || p->nonblocking_ok) && HeldSetHasRoom(p)) {
    if (Append(p, iov, iovcnt)) {
      ReleaseIfFull(p, fd, nonblocking);
      return static_cast<ssize_t>(n);
    }
    return PassAfterHeld(p, fd, nonblocking, passthrough, context);  // the kernel answers EFAULT
  }
  const ssize_t sent = SendHeldThen(p, fd, iov, iovcnt, flags, nonblocking);
  if (sent < 0 && errno == EFAULT) return PassAfterHeld(p, fd, nonblocking, passthrough, context);
  if (!HoldsSomething(p)) RemoveFromHeldSet(p);
  return sent;
}

}  // namespace tcpadvise
