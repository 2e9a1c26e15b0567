// RealLibc: the libc functions the shim wraps, bound once with
// dlsym(RTLD_NEXT). Every wrapper calls through these pointers; calling dlsym
// per call would cost about 36 ns against 2 ns for a cached pointer.
#ifndef TCPADVISE_REAL_LIBC_H_
#define TCPADVISE_REAL_LIBC_H_

#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>


namespace tcpadvise {

struct RealLibc;

// g_real is bound by BindRealLibc, normally from the shim's constructor.
extern RealLibc g_real;

// BindRealLibc fills g_real; safe to call more than once and from any thread.
void BindRealLibc();

// SetDirectCalls switches the 13 slots the Libc* calls use (write ...
// epoll_pwait) to functions that make the system call themselves (true), or
// back to libc's (false). True while the process runs one application thread
// and the shim's own (background_thread.h), as glibc does in a
// single-threaded process: a shim thread would otherwise switch on glibc's
// cancellation bookkeeping around every call for good, some 20 ns each,
// though nothing can cancel a thread that has no sibling (pthread_cancel
// switches this off first). Switching the slots, not testing a flag, keeps
// the test off every call; the slots are read and written atomically
// (relaxed: either target is right for a shim thread, and an application
// thread is created only after the switch back, which pthread_create orders).
void SetDirectCalls(bool direct);

// BindFirst<&RealLibc::slot>::Call is what slot holds until BindRealLibc
// fills it: it binds, then makes the call. The hot calls (Libc* below) then
// call their slot as it is, with no test for an unbound one: a hook that
// runs before the shim's constructor (another library's constructor) binds
// through it.
template <auto kSlot>
struct BindFirst;
template <typename R, typename... A, R (*RealLibc::*kSlot)(A...)>
struct BindFirst<kSlot> {
  [[gnu::cold]] static R Call(A... a);
};

// RealLibc holds one pointer per wrapped libc function.
struct alignas(64) RealLibc {
  // The calls of a request share the first cache line: those a one-write
  // server makes on every request (redis: read, write, epoll_wait; nginx:
  // recv, writev, epoll_wait, and open64 and close for the file it serves;
  // memcached: read, sendmsg), so that a request touches one line of these
  // slots, not four (callgrind's cache simulation on nginx: the slots of
  // open64, epoll_wait and close missed 0.9 times a request). The other
  // calls of the family fill the second.
  ssize_t (*write)(int, const void*, size_t) = BindFirst<&RealLibc::write>::Call;
  ssize_t (*read)(int, void*, size_t) = BindFirst<&RealLibc::read>::Call;
  ssize_t (*writev)(int, const struct iovec*, int) = BindFirst<&RealLibc::writev>::Call;
  ssize_t (*recv)(int, void*, size_t, int) = BindFirst<&RealLibc::recv>::Call;
  ssize_t (*sendmsg)(int, const struct msghdr*, int) = BindFirst<&RealLibc::sendmsg>::Call;
  int (*epoll_wait)(int, struct epoll_event*, int, int) = BindFirst<&RealLibc::epoll_wait>::Call;
  int (*close)(int) = BindFirst<&RealLibc::close>::Call;
  int (*open64)(const char*, int, ...);
  ssize_t (*readv)(int, const struct iovec*, int) = BindFirst<&RealLibc::readv>::Call;
  ssize_t (*send)(int, const void*, size_t, int) = BindFirst<&RealLibc::send>::Call;
  ssize_t (*sendto)(int, const void*, size_t, int, const struct sockaddr*, socklen_t) = BindFirst<&RealLibc::sendto>::Call;
  ssize_t (*recvfrom)(int, void*, size_t, int, struct sockaddr*, socklen_t*) = BindFirst<&RealLibc::recvfrom>::Call;
  ssize_t (*recvmsg)(int, struct msghdr*, int) = BindFirst<&RealLibc::recvmsg>::Call;
  int (*epoll_pwait)(int, struct epoll_event*, int, int, const sigset_t*) = BindFirst<&RealLibc::epoll_pwait>::Call;
  int (*poll)(struct pollfd*, nfds_t, int) = BindFirst<&RealLibc::poll>::Call;
  int (*open)(const char*, int, ...);
  int (*sendmmsg)(int, struct mmsghdr*, unsigned int, int);
  ssize_t (*sendfile)(int, int, off_t*, size_t);
  ssize_t (*sendfile64)(int, int, off64_t*, size_t);
  int (*recvmmsg)(int, struct mmsghdr*, unsigned int, int, struct timespec*);
  ssize_t (*read_chk)(int, void*, size_t, size_t);
  ssize_t (*recv_chk)(int, void*, size_t, size_t, int);
  ssize_t (*recvfrom_chk)(int, void*, size_t, size_t, int, struct sockaddr*, socklen_t*);
  int (*socket)(int, int, int);
  int (*accept)(int, struct sockaddr*, socklen_t*);
  int (*accept4)(int, struct sockaddr*, socklen_t*, int);
  int (*connect)(int, const struct sockaddr*, socklen_t);
  int (*listen)(int, int);
  int (*close_range)(unsigned int, unsigned int, int);
  int (*shutdown)(int, int);
  int (*dup)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  int (*fcntl)(int, int, ...);
  int (*fcntl64)(int, int, ...);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  int (*ioctl)(int, unsigned long, ...);
  int (*ppoll)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*);
  int (*select)(int, fd_set*, fd_set*, fd_set*, struct timeval*);
  int (*pselect)(int, fd_set*, fd_set*, fd_set*, const struct timespec*, const sigset_t*);
  int (*poll_chk)(struct pollfd*, nfds_t, int, size_t);
  int (*ppoll_chk)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*, size_t);
  int (*epoll_pwait2)(int, struct epoll_event*, int, const struct timespec*, const sigset_t*);
  long (*syscall)(long, ...);
  int (*fclose)(FILE*);
  void (*closefrom)(int);
  FILE* (*fdopen)(int, const char*);
  ssize_t (*splice)(int, off64_t*, int, off64_t*, size_t, unsigned int);
  // Calls that give out fds, for entries left by closes the shim did not see
  // (open and open64 above).
  int (*openat)(int, const char*, int, ...);
  int (*openat64)(int, const char*, int, ...);
  int (*open_2)(const char*, int);
  int (*open64_2)(const char*, int);
  int (*openat_2)(int, const char*, int);
  int (*openat64_2)(int, const char*, int);
  int (*creat)(const char*, mode_t);
  int (*creat64)(const char*, mode_t);
  int (*pipe)(int*);
  int (*pipe2)(int*, int);
  int (*socketpair)(int, int, int, int*);
  int (*eventfd)(unsigned int, int);
  int (*epoll_create)(int);
  int (*epoll_create1)(int);
  int (*memfd_create)(const char*, unsigned int);
  FILE* (*fopen)(const char*, const char*);
  FILE* (*fopen64)(const char*, const char*);
  // Changes to mappings (user_memory.h).
  int (*munmap)(void*, size_t);
  void* (*mremap)(void*, size_t, size_t, int, ...);
  int (*mprotect)(void*, size_t, int);
  // Wrapped to count application threads (background_thread.h).
  int (*pthread_create)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  int (*pthread_cancel)(pthread_t);
  // Bound here, not on the call: exec and _exit run after vfork, _exit in
  // signal handlers too, where dlsym (the loader's lock) must not be called.
  int (*execve)(const char*, char* const*, char* const*);
  int (*execv)(const char*, char* const*);
  int (*execvp)(const char*, char* const*);
  int (*execvpe)(const char*, char* const*, char* const*);
  int (*fexecve)(int, char* const*, char* const*);
  int (*posix_spawn)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*, char* const*,
                     char* const*);
  int (*posix_spawnp)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*, char* const*,
                      char* const*);
  int (*system)(const char*);
  FILE* (*popen)(const char*, const char*);
  void (*exit_now)(int);
  void (*exit_now_c99)(int);
  // The dispositions a program sets (signals.h); sigaction also from the
  // shim's signal handler.
  int (*sigaction)(int, const struct sigaction*, struct sigaction*);
  sighandler_t (*signal)(int, sighandler_t);
  sighandler_t (*bsd_signal)(int, sighandler_t);
  sighandler_t (*sysv_signal)(int, sighandler_t);
  sighandler_t (*sigset)(int, sighandler_t);
  // The longjmp family, which may leave a signal handler (signals.h).
  void (*longjmp)(struct __jmp_buf_tag*, int);
  void (*underscore_longjmp)(struct __jmp_buf_tag*, int);
  void (*siglongjmp)(struct __jmp_buf_tag*, int);
  void (*longjmp_chk)(struct __jmp_buf_tag*, int);
};

// LoadSlot reads a slot SetDirectCalls may switch (relaxed: a plain load).
template <typename Fn>
inline Fn LoadSlot(Fn& slot) {
  return __atomic_load_n(&slot, __ATOMIC_RELAXED);
}

template <typename R, typename... A, R (*RealLibc::*kSlot)(A...)>
R BindFirst<kSlot>::Call(A... a) {
  BindRealLibc();
  return LoadSlot(g_real.*kSlot)(a...);
}

// Real returns a bound pointer: a library constructor that runs before ours
// may already call a wrapped function, so the first call binds on demand.
template <typename Fn>
inline Fn Real(Fn& slot) {
  if (__builtin_expect(slot == nullptr, 0)) BindRealLibc();
  return slot;
}

// The calls on the hot path: through their slot, libc's function or, while
// SetDirectCalls(true), the shim's own that makes the system call; each
// returns and sets errno as libc does.
inline ssize_t LibcWrite(int fd, const void* buf, size_t n) { return LoadSlot(g_real.write)(fd, buf, n); }
inline ssize_t LibcWritev(int fd, const struct iovec* iov, int iovcnt) {
  return LoadSlot(g_real.writev)(fd, iov, iovcnt);
}
inline ssize_t LibcSend(int fd, const void* buf, size_t n, int flags) {
  return LoadSlot(g_real.send)(fd, buf, n, flags);
}
inline ssize_t LibcSendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* addr, socklen_t len) {
  return LoadSlot(g_real.sendto)(fd, buf, n, flags, addr, len);
}
inline ssize_t LibcSendmsg(int fd, const struct msghdr* msg, int flags) {
  return LoadSlot(g_real.sendmsg)(fd, msg, flags);
}
inline ssize_t LibcRead(int fd, void* buf, size_t n) { return LoadSlot(g_real.read)(fd, buf, n); }
inline ssize_t LibcReadv(int fd, const struct iovec* iov, int iovcnt) {
  return LoadSlot(g_real.readv)(fd, iov, iovcnt);
}
inline ssize_t LibcRecv(int fd, void* buf, size_t n, int flags) { return LoadSlot(g_real.recv)(fd, buf, n, flags); }
inline ssize_t LibcRecvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr, socklen_t* len) {
  return LoadSlot(g_real.recvfrom)(fd, buf, n, flags, addr, len);
}
inline ssize_t LibcRecvmsg(int fd, struct msghdr* msg, int flags) {
  return LoadSlot(g_real.recvmsg)(fd, msg, flags);
}
inline int LibcPoll(struct pollfd* fds, nfds_t nfds, int timeout) {
  return LoadSlot(g_real.poll)(fds, nfds, timeout);
}
inline int LibcEpollWait(int epfd, struct epoll_event* events, int maxevents, int timeout) {
  return LoadSlot(g_real.epoll_wait)(epfd, events, maxevents, timeout);
}
inline int LibcEpollPwait(int epfd, struct epoll_event* events, int maxevents, int timeout, const sigset_t* mask) {
  return LoadSlot(g_real.epoll_pwait)(epfd, events, maxevents, timeout, mask);
}

}  // namespace tcpadvise

#endif  // TCPADVISE_REAL_LIBC_H_
