#include "real_libc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

#include <atomic>

namespace tcpadvise {

// g_real is constant-initialized (__constinit: a build error otherwise): the hot slots
// hold BindFirst before any code runs, a hook called before any constructor too.
__constinit RealLibc g_real{};

// Bind stores atomically: a hot slot may be read meanwhile (LoadSlot).
template <typename Fn>
static void Bind(Fn& slot, const char* name) {
  __atomic_store_n(&slot, reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name)), __ATOMIC_RELAXED);
}

// Direct* make the system call through libc's syscall(), which sets errno as
// libc's wrappers do but keeps no cancellation bookkeeping (SetDirectCalls).
static ssize_t DirectWrite(int fd, const void* buf, size_t n) { return g_real.syscall(SYS_write, fd, buf, n); }
static ssize_t DirectRead(int fd, void* buf, size_t n) { return g_real.syscall(SYS_read, fd, buf, n); }
static ssize_t DirectWritev(int fd, const struct iovec* iov, int iovcnt) {
  return g_real.syscall(SYS_writev, fd, iov, iovcnt);
}
static ssize_t DirectReadv(int fd, const struct iovec* iov, int iovcnt) {
  return g_real.syscall(SYS_readv, fd, iov, iovcnt);
}
static ssize_t DirectSend(int fd, const void* buf, size_t n, int flags) {
  return g_real.syscall(SYS_sendto, fd, buf, n, flags, nullptr, 0);
}
static ssize_t DirectRecv(int fd, void* buf, size_t n, int flags) {
  return g_real.syscall(SYS_recvfrom, fd, buf, n, flags, nullptr, nullptr);
}
static ssize_t DirectSendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* addr, socklen_t len) {
  return g_real.syscall(SYS_sendto, fd, buf, n, flags, addr, len);
}
static ssize_t DirectRecvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr, socklen_t* len) {
  return g_real.syscall(SYS_recvfrom, fd, buf, n, flags, addr, len);
}
static ssize_t DirectSendmsg(int fd, const struct msghdr* msg, int flags) {
  return g_real.syscall(SYS_sendmsg, fd, msg, flags);
}
static ssize_t DirectRecvmsg(int fd, struct msghdr* msg, int flags) {
  return g_real.syscall(SYS_recvmsg, fd, msg, flags);
}
static int DirectPoll(struct pollfd* fds, nfds_t nfds, int timeout) {
  return static_cast<int>(g_real.syscall(SYS_poll, fds, nfds, timeout));
}
static int DirectEpollWait(int epfd, struct epoll_event* events, int maxevents, int timeout) {
  return static_cast<int>(g_real.syscall(SYS_epoll_wait, epfd, events, maxevents, timeout));
}
static int DirectEpollPwait(int epfd, struct epoll_event* events, int maxevents, int timeout, const sigset_t* mask) {
  return static_cast<int>(g_real.syscall(SYS_epoll_pwait, epfd, events, maxevents, timeout, mask, _NSIG / 8));
}

// TCPADVISE_HOT_SLOTS(X) lists the 13 slots SetDirectCalls switches, once
// for the struct that keeps libc's, the stores and the copy at binding.
#define TCPADVISE_HOT_SLOTS(X) \
  X(write) X(read) X(writev) X(readv) X(send) X(recv) X(sendto) X(recvfrom) X(sendmsg) X(recvmsg) X(poll) \
  X(epoll_wait) X(epoll_pwait)

// HotSlots holds the hot slots' targets: libc's (bound by BindAll) or the
// Direct* ones.
struct HotSlots {
#define TCPADVISE_HOT_FIELD(name) decltype(RealLibc::name) name;
  TCPADVISE_HOT_SLOTS(TCPADVISE_HOT_FIELD)
#undef TCPADVISE_HOT_FIELD
};
static HotSlots g_libc_hot;
static constexpr HotSlots kDirectHot = {DirectWrite,    DirectRead,     DirectWritev,  DirectReadv, DirectSend,
                                        DirectRecv,     DirectSendto,   DirectRecvfrom, DirectSendmsg, DirectRecvmsg,
                                        DirectPoll,     DirectEpollWait, DirectEpollPwait};

template <typename Fn>
static void Store(Fn& slot, Fn fn) {
  __atomic_store_n(&slot, fn, __ATOMIC_RELAXED);
}

static void StoreHot(const HotSlots& h) {
#define TCPADVISE_STORE_HOT(name) Store(g_real.name, h.name);
  TCPADVISE_HOT_SLOTS(TCPADVISE_STORE_HOT)
#undef TCPADVISE_STORE_HOT
}

static void BindAll() {
  Bind(g_real.write, "write");
  Bind(g_real.writev, "writev");
  Bind(g_real.send, "send");
  Bind(g_real.sendto, "sendto");
  Bind(g_real.sendmsg, "sendmsg");
  Bind(g_real.sendmmsg, "sendmmsg");
  Bind(g_real.sendfile, "sendfile");
  Bind(g_real.sendfile64, "sendfile64");
  Bind(g_real.read, "read");
  Bind(g_real.readv, "readv");
  Bind(g_real.recv, "recv");
  Bind(g_real.recvfrom, "recvfrom");
  Bind(g_real.recvmsg, "recvmsg");
  Bind(g_real.recvmmsg, "recvmmsg");
  Bind(g_real.read_chk, "__read_chk");
  Bind(g_real.recv_chk, "__recv_chk");
  Bind(g_real.recvfrom_chk, "__recvfrom_chk");
  Bind(g_real.socket, "socket");
  Bind(g_real.accept, "accept");
  Bind(g_real.accept4, "accept4");
  Bind(g_real.connect, "connect");
  Bind(g_real.listen, "listen");
  Bind(g_real.close, "close");
  Bind(g_real.close_range, "close_range");
  Bind(g_real.shutdown, "shutdown");
  Bind(g_real.dup, "dup");
  Bind(g_real.dup2, "dup2");
  Bind(g_real.dup3, "dup3");
  Bind(g_real.fcntl, "fcntl");
  Bind(g_real.fcntl64, "fcntl64");
  Bind(g_real.setsockopt, "setsockopt");
  Bind(g_real.ioctl, "ioctl");
  Bind(g_real.poll, "poll");
  Bind(g_real.ppoll, "ppoll");
  Bind(g_real.select, "select");
  Bind(g_real.pselect, "pselect");
  Bind(g_real.epoll_wait, "epoll_wait");
  Bind(g_real.epoll_pwait, "epoll_pwait");
  Bind(g_real.poll_chk, "__poll_chk");
  Bind(g_real.ppoll_chk, "__ppoll_chk");
  Bind(g_real.epoll_pwait2, "epoll_pwait2");
  Bind(g_real.syscall, "syscall");
  Bind(g_real.fclose, "fclose");
  Bind(g_real.closefrom, "closefrom");
  Bind(g_real.fdopen, "fdopen");
  Bind(g_real.splice, "splice");
  Bind(g_real.open, "open");
  Bind(g_real.open64, "open64");
  Bind(g_real.openat, "openat");
  Bind(g_real.openat64, "openat64");
  Bind(g_real.open_2, "__open_2");
  Bind(g_real.open64_2, "__open64_2");
  Bind(g_real.openat_2, "__openat_2");
  Bind(g_real.openat64_2, "__openat64_2");
  Bind(g_real.creat, "creat");
  Bind(g_real.creat64, "creat64");
  Bind(g_real.pipe, "pipe");
  Bind(g_real.pipe2, "pipe2");
  Bind(g_real.socketpair, "socketpair");
  Bind(g_real.eventfd, "eventfd");
  Bind(g_real.epoll_create, "epoll_create");
  Bind(g_real.epoll_create1, "epoll_create1");
  Bind(g_real.memfd_create, "memfd_create");
  Bind(g_real.fopen, "fopen");
  Bind(g_real.fopen64, "fopen64");
  Bind(g_real.munmap, "munmap");
  Bind(g_real.mremap, "mremap");
  Bind(g_real.mprotect, "mprotect");
  Bind(g_real.execve, "execve");
  Bind(g_real.execv, "execv");
  Bind(g_real.execvp, "execvp");
  Bind(g_real.execvpe, "execvpe");
  Bind(g_real.fexecve, "fexecve");
  Bind(g_real.posix_spawn, "posix_spawn");
  Bind(g_real.posix_spawnp, "posix_spawnp");
  Bind(g_real.system, "system");
  Bind(g_real.popen, "popen");
  Bind(g_real.exit_now, "_exit");
  Bind(g_real.exit_now_c99, "_Exit");
  Bind(g_real.pthread_create, "pthread_create");
  Bind(g_real.pthread_cancel, "pthread_cancel");
  Bind(g_real.sigaction, "sigaction");
  Bind(g_real.signal, "signal");
  Bind(g_real.bsd_signal, "bsd_signal");
  Bind(g_real.sysv_signal, "sysv_signal");
  Bind(g_real.sigset, "sigset");
  Bind(g_real.longjmp, "longjmp");
  Bind(g_real.underscore_longjmp, "_longjmp");
  Bind(g_real.siglongjmp, "siglongjmp");
  Bind(g_real.longjmp_chk, "__longjmp_chk");
#define TCPADVISE_KEEP_HOT(name) g_libc_hot.name = g_real.name;
  TCPADVISE_HOT_SLOTS(TCPADVISE_KEEP_HOT)
#undef TCPADVISE_KEEP_HOT
}

void BindRealLibc() {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, BindAll);
}

// g_direct_calls is what SetDirectCalls last stored: a switch to the state
// the slots are in stores nothing (every application pthread_create asks
// for libc's), so it neither costs 13 stores nor undoes a slot set since.
static std::atomic<bool> g_direct_calls{false};

void SetDirectCalls(bool direct) {
  if (g_direct_calls.exchange(direct, std::memory_order_relaxed) == direct) return;
  BindRealLibc();  // g_libc_hot is libc's from here on
  StoreHot(direct ? kDirectHot : g_libc_hot);
}

}  // namespace tcpadvise
