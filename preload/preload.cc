// The LD_PRELOAD entry points: each libc name the shim wraps, forwarded in one
// line to libtcpadvise's hooks. Only these symbols leave the shared object
// (exports.map); everything else, jemalloc included, stays hidden.
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libtcpadvise/background_thread.h"
#include "libtcpadvise/hooks.h"
#include "libtcpadvise/real_libc.h"
#include "libtcpadvise/runtime.h"
#include "libtcpadvise/signals.h"

#define TCPADVISE_EXPORT extern "C" __attribute__((visibility("default")))

namespace h = tcpadvise::hooks;

// The constructor runs before the program's own; priority 101 puts it ahead
// of other constructors in this object.
__attribute__((constructor(101))) static void TcpadviseStart() { tcpadvise::RuntimeStart(); }
__attribute__((destructor(101))) static void TcpadviseStop() { tcpadvise::RuntimeStop(); }

TCPADVISE_EXPORT ssize_t write(int fd, const void* buf, size_t n) { return h::Write(fd, buf, n); }
TCPADVISE_EXPORT ssize_t writev(int fd, const struct iovec* iov, int iovcnt) { return h::Writev(fd, iov, iovcnt); }
TCPADVISE_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) { return h::Send(fd, buf, n, flags); }
TCPADVISE_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* addr,
                                socklen_t addrlen) {
  return h::Sendto(fd, buf, n, flags, addr, addrlen);
}
TCPADVISE_EXPORT ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) { return h::Sendmsg(fd, msg, flags); }
TCPADVISE_EXPORT int sendmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags) {
  return h::Sendmmsg(fd, msgs, vlen, flags);
}
TCPADVISE_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  return h::Sendfile(out_fd, in_fd, offset, count);
}
TCPADVISE_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count) {
  return h::Sendfile64(out_fd, in_fd, offset, count);
}

TCPADVISE_EXPORT ssize_t read(int fd, void* buf, size_t n) { return h::Read(fd, buf, n); }
TCPADVISE_EXPORT ssize_t readv(int fd, const struct iovec* iov, int iovcnt) { return h::Readv(fd, iov, iovcnt); }
TCPADVISE_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) { return h::Recv(fd, buf, n, flags); }
TCPADVISE_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr, socklen_t* addrlen) {
  return h::Recvfrom(fd, buf, n, flags, addr, addrlen);
}
TCPADVISE_EXPORT ssize_t recvmsg(int fd, struct msghdr* msg, int flags) { return h::Recvmsg(fd, msg, flags); }
TCPADVISE_EXPORT int recvmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags, struct timespec* timeout) {
  return h::Recvmmsg(fd, msgs, vlen, flags, timeout);
}
TCPADVISE_EXPORT ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  return h::ReadChk(fd, buf, n, buflen);
}
TCPADVISE_EXPORT ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  return h::RecvChk(fd, buf, n, buflen, flags);
}
TCPADVISE_EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, struct sockaddr* addr,
                                        socklen_t* addrlen) {
  return h::RecvfromChk(fd, buf, n, buflen, flags, addr, addrlen);
}

TCPADVISE_EXPORT int socket(int domain, int type, int protocol) { return h::Socket(domain, type, protocol); }
TCPADVISE_EXPORT int accept(int fd, struct sockaddr* addr, socklen_t* addrlen) { return h::Accept(fd, addr, addrlen); }
TCPADVISE_EXPORT int accept4(int fd, struct sockaddr* addr, socklen_t* addrlen, int flags) {
  return h::Accept4(fd, addr, addrlen, flags);
}
TCPADVISE_EXPORT int connect(int fd, const struct sockaddr* addr, socklen_t addrlen) {
  return h::Connect(fd, addr, addrlen);
}
TCPADVISE_EXPORT int listen(int fd, int backlog) { return h::Listen(fd, backlog); }
TCPADVISE_EXPORT int close(int fd) { return h::Close(fd); }
TCPADVISE_EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
  return h::CloseRange(first, last, flags);
}
TCPADVISE_EXPORT int shutdown(int fd, int how) { return h::Shutdown(fd, how); }
TCPADVISE_EXPORT int dup(int fd) { return h::Dup(fd); }
TCPADVISE_EXPORT int dup2(int old_fd, int new_fd) { return h::Dup2(old_fd, new_fd); }
TCPADVISE_EXPORT int dup3(int old_fd, int new_fd, int flags) { return h::Dup3(old_fd, new_fd, flags); }
TCPADVISE_EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  return h::Fcntl(fd, cmd, arg);
}
TCPADVISE_EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  return h::Fcntl64(fd, cmd, arg);
}
TCPADVISE_EXPORT int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return h::Ioctl(fd, request, arg);
}
TCPADVISE_EXPORT int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  return h::Setsockopt(fd, level, name, value, len);
}

TCPADVISE_EXPORT int poll(struct pollfd* fds, nfds_t nfds, int timeout) { return h::Poll(fds, nfds, timeout); }
TCPADVISE_EXPORT int ppoll(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout, const sigset_t* mask) {
  return h::Ppoll(fds, nfds, timeout, mask);
}
TCPADVISE_EXPORT int select(int nfds, fd_set* r, fd_set* w, fd_set* e, struct timeval* timeout) {
  return h::Select(nfds, r, w, e, timeout);
}
TCPADVISE_EXPORT int pselect(int nfds, fd_set* r, fd_set* w, fd_set* e, const struct timespec* timeout,
                             const sigset_t* mask) {
  return h::Pselect(nfds, r, w, e, timeout, mask);
}
TCPADVISE_EXPORT int epoll_wait(int epfd, struct epoll_event* events, int maxevents, int timeout) {
  return h::EpollWait(epfd, events, maxevents, timeout);
}
TCPADVISE_EXPORT int epoll_pwait(int epfd, struct epoll_event* events, int maxevents, int timeout,
                                 const sigset_t* mask) {
  return h::EpollPwait(epfd, events, maxevents, timeout, mask);
}

TCPADVISE_EXPORT int __poll_chk(struct pollfd* fds, nfds_t nfds, int timeout, size_t fdslen) {
  return h::PollChk(fds, nfds, timeout, fdslen);
}
TCPADVISE_EXPORT int __ppoll_chk(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout,
                                 const sigset_t* mask, size_t fdslen) {
  return h::PpollChk(fds, nfds, timeout, mask, fdslen);
}
TCPADVISE_EXPORT int epoll_pwait2(int epfd, struct epoll_event* events, int maxevents, const struct timespec* timeout,
                                  const sigset_t* mask) {
  return h::EpollPwait2(epfd, events, maxevents, timeout, mask);
}

// syscall: the six argument registers, passed on as they came.
TCPADVISE_EXPORT long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& arg : a) arg = va_arg(ap, long);
  va_end(ap);
  return h::Syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
TCPADVISE_EXPORT int fclose(FILE* stream) { return h::Fclose(stream); }
TCPADVISE_EXPORT void closefrom(int first) { h::Closefrom(first); }
TCPADVISE_EXPORT FILE* fdopen(int fd, const char* mode) { return h::Fdopen(fd, mode); }
TCPADVISE_EXPORT ssize_t splice(int fd_in, off64_t* off_in, int fd_out, off64_t* off_out, size_t len,
                                unsigned int flags) {
  return h::Splice(fd_in, off_in, fd_out, off_out, len, flags);
}

// Calls that give out fds. TCPADVISE_MODE reads open's optional mode, with
// one test: O_TMPFILE's own bit alone (without O_DIRECTORY's) reads a mode
// that libc then ignores, for a call the kernel refuses (EINVAL).
#define TCPADVISE_MODE(flags)                                              \
  mode_t mode = 0;                                                         \
  if (((flags) & (O_CREAT | (O_TMPFILE & ~O_DIRECTORY))) != 0) {           \
    va_list ap;                                                            \
    va_start(ap, flags);                                                   \
    mode = static_cast<mode_t>(va_arg(ap, int));                           \
    va_end(ap);                                                            \
  }
namespace t = tcpadvise;
TCPADVISE_EXPORT int open(const char* path, int flags, ...) {
  TCPADVISE_MODE(flags);
  return h::NewFile(t::Real(t::g_real.open)(path, flags, mode));
}
TCPADVISE_EXPORT int open64(const char* path, int flags, ...) {
  TCPADVISE_MODE(flags);
  return h::NewFile(t::Real(t::g_real.open64)(path, flags, mode));
}
TCPADVISE_EXPORT int openat(int dir, const char* path, int flags, ...) {
  TCPADVISE_MODE(flags);
  return h::NewFile(t::Real(t::g_real.openat)(dir, path, flags, mode));
}
TCPADVISE_EXPORT int openat64(int dir, const char* path, int flags, ...) {
  TCPADVISE_MODE(flags);
  return h::NewFile(t::Real(t::g_real.openat64)(dir, path, flags, mode));
}
#undef TCPADVISE_MODE
TCPADVISE_EXPORT int __open_2(const char* path, int flags) { return h::NewFile(t::Real(t::g_real.open_2)(path, flags)); }
TCPADVISE_EXPORT int __open64_2(const char* path, int flags) {
  return h::NewFile(t::Real(t::g_real.open64_2)(path, flags));
}
TCPADVISE_EXPORT int __openat_2(int dir, const char* path, int flags) {
  return h::NewFile(t::Real(t::g_real.openat_2)(dir, path, flags));
}
TCPADVISE_EXPORT int __openat64_2(int dir, const char* path, int flags) {
  return h::NewFile(t::Real(t::g_real.openat64_2)(dir, path, flags));
}
TCPADVISE_EXPORT int creat(const char* path, mode_t mode) { return h::NewFile(t::Real(t::g_real.creat)(path, mode)); }
TCPADVISE_EXPORT int creat64(const char* path, mode_t mode) {
  return h::NewFile(t::Real(t::g_real.creat64)(path, mode));
}
TCPADVISE_EXPORT int pipe(int fds[2]) { return h::Pipe(fds, t::Real(t::g_real.pipe)(fds)); }
TCPADVISE_EXPORT int pipe2(int fds[2], int flags) { return h::Pipe2(fds, flags); }
TCPADVISE_EXPORT int socketpair(int domain, int type, int protocol, int fds[2]) {
  return h::Pipe(fds, t::Real(t::g_real.socketpair)(domain, type, protocol, fds));
}
TCPADVISE_EXPORT int eventfd(unsigned int value, int flags) {
  return h::NewFile(t::Real(t::g_real.eventfd)(value, flags));
}
TCPADVISE_EXPORT int epoll_create(int size) { return h::NewFile(t::Real(t::g_real.epoll_create)(size)); }
TCPADVISE_EXPORT int epoll_create1(int flags) { return h::NewFile(t::Real(t::g_real.epoll_create1)(flags)); }
TCPADVISE_EXPORT int memfd_create(const char* name, unsigned int flags) {
  return h::NewFile(t::Real(t::g_real.memfd_create)(name, flags));
}
TCPADVISE_EXPORT FILE* fopen(const char* path, const char* mode) {
  return h::NewStream(t::Real(t::g_real.fopen)(path, mode));
}
TCPADVISE_EXPORT FILE* fopen64(const char* path, const char* mode) {
  return h::NewStream(t::Real(t::g_real.fopen64)(path, mode));
}

// Changes to mappings: buffers confirmed readable are checked again.
TCPADVISE_EXPORT int munmap(void* addr, size_t length) {
  const int result = t::Real(t::g_real.munmap)(addr, length);
  h::MemoryChanged(nullptr);
  return result;
}
TCPADVISE_EXPORT int mprotect(void* addr, size_t length, int prot) {
  const int result = t::Real(t::g_real.mprotect)(addr, length, prot);
  // Only a range made unreadable matters (JITs flip code between RW and RX often).
  if ((prot & PROT_READ) == 0) h::MemoryChanged(nullptr);
  return result;
}
TCPADVISE_EXPORT void* mremap(void* addr, size_t old_size, size_t new_size, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  void* new_address = va_arg(ap, void*);
  va_end(ap);
  return h::MemoryChanged(t::Real(t::g_real.mremap)(addr, old_size, new_size, flags, new_address));
}

// Exec, spawn and _exit: what a policy holds goes out first. Bound with the
// rest: exec often follows vfork, where dlsym must not run.
TCPADVISE_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  h::BeforeExec();
  return tcpadvise::Real(tcpadvise::g_real.execve)(path, argv, envp);
}
TCPADVISE_EXPORT int execv(const char* path, char* const argv[]) {
  h::BeforeExec();
  return tcpadvise::Real(tcpadvise::g_real.execv)(path, argv);
}
TCPADVISE_EXPORT int execvp(const char* file, char* const argv[]) {
  h::BeforeExec();
  return tcpadvise::Real(tcpadvise::g_real.execvp)(file, argv);
}
TCPADVISE_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  h::BeforeExec();
  return tcpadvise::Real(tcpadvise::g_real.execvpe)(file, argv, envp);
}
TCPADVISE_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  h::BeforeExec();
  return tcpadvise::Real(tcpadvise::g_real.fexecve)(fd, argv, envp);
}

// TCPADVISE_COLLECT_ARGS turns execl's variadic list into the argv execv takes.
#define TCPADVISE_COLLECT_ARGS(first, argv)                                           \
  size_t count = 1;                                                                    \
  {                                                                                    \
    va_list count_ap;                                                                  \
    va_copy(count_ap, ap);                                                             \
    while (va_arg(count_ap, char*) != nullptr) ++count;                                \
    va_end(count_ap);                                                                  \
  }                                                                                    \
  char** argv = static_cast<char**>(__builtin_alloca((count + 1) * sizeof(char*)));     \
  argv[0] = const_cast<char*>(first);                                                  \
  for (size_t i = 1; i <= count; ++i) argv[i] = va_arg(ap, char*);

TCPADVISE_EXPORT int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  TCPADVISE_COLLECT_ARGS(arg, argv);
  va_end(ap);
  return execv(path, argv);
}
TCPADVISE_EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  TCPADVISE_COLLECT_ARGS(arg, argv);
  va_end(ap);
  return execvp(file, argv);
}
TCPADVISE_EXPORT int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  TCPADVISE_COLLECT_ARGS(arg, argv);
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return execve(path, argv, envp);
}
#undef TCPADVISE_COLLECT_ARGS

TCPADVISE_EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                                 const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  h::BeforeExec();
  return tcpadvise::Real(tcpadvise::g_real.posix_spawn)(pid, path, actions, attr, argv, envp);
}
TCPADVISE_EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                                  const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  h::BeforeExec();
  return tcpadvise::Real(tcpadvise::g_real.posix_spawnp)(pid, file, actions, attr, argv, envp);
}
TCPADVISE_EXPORT int system(const char* command) {
  h::BeforeExec();
  return tcpadvise::Real(tcpadvise::g_real.system)(command);
}
TCPADVISE_EXPORT FILE* popen(const char* command, const char* type) {
  h::BeforeExec();
  return tcpadvise::Real(tcpadvise::g_real.popen)(command, type);
}
TCPADVISE_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  return tcpadvise::StartApplicationThread(thread, attr, start, arg);
}
TCPADVISE_EXPORT int pthread_cancel(pthread_t thread) {
  tcpadvise::NoteApplicationThread();
  return tcpadvise::Real(tcpadvise::g_real.pthread_cancel)(thread);
}
// _exit runs no destructor: a fork child that ends with it writes its trace here.
TCPADVISE_EXPORT void _exit(int status) {
  h::BeforeExit();
  tcpadvise::RuntimeStopAtExitCall();
  tcpadvise::Real(tcpadvise::g_real.exit_now)(status);
  __builtin_unreachable();
}
TCPADVISE_EXPORT void _Exit(int status) {
  h::BeforeExit();
  tcpadvise::RuntimeStopAtExitCall();
  tcpadvise::Real(tcpadvise::g_real.exit_now_c99)(status);
  __builtin_unreachable();
}

// The dispositions the program sets: a stop signal it leaves at the default
// still writes the final trace (signals.h). Not instrumented by ThreadSanitizer,
// whose start-up calls sigaction, through here, before it can count calls.
#define TCPADVISE_SIGNAL_EXPORT TCPADVISE_EXPORT __attribute__((no_sanitize("thread")))
TCPADVISE_SIGNAL_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return tcpadvise::Sigaction(sig, act, old);
}
TCPADVISE_SIGNAL_EXPORT sighandler_t signal(int sig, sighandler_t handler) { return tcpadvise::Signal(sig, handler); }
TCPADVISE_SIGNAL_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) { return tcpadvise::Signal(sig, handler); }
TCPADVISE_SIGNAL_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) { return tcpadvise::SysvSignal(sig, handler); }
TCPADVISE_SIGNAL_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) {
  return tcpadvise::SysvSignal(sig, handler);
}
TCPADVISE_SIGNAL_EXPORT sighandler_t sigset(int sig, sighandler_t disposition) { return tcpadvise::Sigset(sig, disposition); }
#undef TCPADVISE_SIGNAL_EXPORT

// A longjmp may leave the program's signal handlers (signals.h).
extern "C" void __longjmp_chk(struct __jmp_buf_tag* env, int value) noexcept __attribute__((noreturn));
#define TCPADVISE_LONGJMP(name, slot)                                                       \
  TCPADVISE_EXPORT void name(struct __jmp_buf_tag* env, int value) noexcept {           \
    tcpadvise::LeaveSignalHandlers();                                                   \
    tcpadvise::Real(tcpadvise::g_real.slot)(env, value);                                \
    __builtin_unreachable();                                                            \
  }
TCPADVISE_LONGJMP(longjmp, longjmp)
TCPADVISE_LONGJMP(_longjmp, underscore_longjmp)
TCPADVISE_LONGJMP(siglongjmp, siglongjmp)
TCPADVISE_LONGJMP(__longjmp_chk, longjmp_chk)
#undef TCPADVISE_LONGJMP
