// RealLibc: the libc functions the shim wraps, bound once with
// dlsym(RTLD_NEXT). Every wrapper calls through these pointers; calling dlsym
// per call would cost about 36 ns against 2 ns for a cached pointer.
#ifndef TCPADVISE_REAL_LIBC_H_
#define TCPADVISE_REAL_LIBC_H_

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

namespace tcpadvise {

// RealLibc holds one pointer per wrapped libc function.
struct RealLibc {
  ssize_t (*write)(int, const void*, size_t);
  ssize_t (*writev)(int, const struct iovec*, int);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*sendto)(int, const void*, size_t, int, const struct sockaddr*, socklen_t);
  ssize_t (*sendmsg)(int, const struct msghdr*, int);
  int (*sendmmsg)(int, struct mmsghdr*, unsigned int, int);
  ssize_t (*sendfile)(int, int, off_t*, size_t);
  ssize_t (*sendfile64)(int, int, off64_t*, size_t);
  ssize_t (*read)(int, void*, size_t);
  ssize_t (*readv)(int, const struct iovec*, int);
  ssize_t (*recv)(int, void*, size_t, int);
  ssize_t (*recvfrom)(int, void*, size_t, int, struct sockaddr*, socklen_t*);
  ssize_t (*recvmsg)(int, struct msghdr*, int);
  int (*recvmmsg)(int, struct mmsghdr*, unsigned int, int, struct timespec*);
  ssize_t (*read_chk)(int, void*, size_t, size_t);
  ssize_t (*recv_chk)(int, void*, size_t, size_t, int);
  ssize_t (*recvfrom_chk)(int, void*, size_t, size_t, int, struct sockaddr*, socklen_t*);
  int (*socket)(int, int, int);
  int (*accept)(int, struct sockaddr*, socklen_t*);
  int (*accept4)(int, struct sockaddr*, socklen_t*, int);
  int (*connect)(int, const struct sockaddr*, socklen_t);
  int (*listen)(int, int);
  int (*close)(int);
  int (*close_range)(unsigned int, unsigned int, int);
  int (*shutdown)(int, int);
  int (*dup)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  int (*fcntl)(int, int, ...);
  int (*fcntl64)(int, int, ...);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  int (*ioctl)(int, unsigned long, ...);
  int (*poll)(struct pollfd*, nfds_t, int);
  int (*ppoll)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*);
  int (*select)(int, fd_set*, fd_set*, fd_set*, struct timeval*);
  int (*pselect)(int, fd_set*, fd_set*, fd_set*, const struct timespec*, const sigset_t*);
  int (*epoll_wait)(int, struct epoll_event*, int, int);
  int (*epoll_pwait)(int, struct epoll_event*, int, int, const sigset_t*);
  // Bound here, not on the call: _exit runs in signal handlers and after
  // vfork, where dlsym (the loader's lock) must not be called.
  void (*exit_now)(int);
  void (*exit_now_c99)(int);
};

// g_real is bound by BindRealLibc, normally from the shim's constructor.
extern RealLibc g_real;

// BindRealLibc fills g_real; safe to call more than once and from any thread.
void BindRealLibc();

// Real returns a bound pointer: a library constructor that runs before ours
// may already call a wrapped function, so the first call binds on demand.
template <typename Fn>
inline Fn Real(Fn& slot) {
  if (__builtin_expect(slot == nullptr, 0)) BindRealLibc();
  return slot;
}

}  // namespace tcpadvise

#endif  // TCPADVISE_REAL_LIBC_H_
