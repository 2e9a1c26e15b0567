// Hooks: what the shim does around each wrapped libc call. preload/ exports
// the libc names and forwards each to the function of the same name here.
// Every hook returns exactly what libc returned, with the same errno.
#ifndef TCPADVISE_HOOKS_H_
#define TCPADVISE_HOOKS_H_

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "real_libc.h"
#include "socket_table.h"

namespace tcpadvise {
namespace hooks {

ssize_t Write(int fd, const void* buf, size_t n);
ssize_t Writev(int fd, const struct iovec* iov, int iovcnt);
ssize_t Send(int fd, const void* buf, size_t n, int flags);
ssize_t Sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* addr, socklen_t addrlen);
ssize_t Sendmsg(int fd, const struct msghdr* msg, int flags);
int Sendmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags);
ssize_t Sendfile(int out_fd, int in_fd, off_t* offset, size_t count);
ssize_t Sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count);

ssize_t Read(int fd, void* buf, size_t n);
ssize_t Readv(int fd, const struct iovec* iov, int iovcnt);
ssize_t Recv(int fd, void* buf, size_t n, int flags);
ssize_t Recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr, socklen_t* addrlen);
ssize_t Recvmsg(int fd, struct msghdr* msg, int flags);
int Recvmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags, struct timespec* timeout);
ssize_t ReadChk(int fd, void* buf, size_t n, size_t buflen);
ssize_t RecvChk(int fd, void* buf, size_t n, size_t buflen, int flags);
ssize_t RecvfromChk(int fd, void* buf, size_t n, size_t buflen, int flags, struct sockaddr* addr, socklen_t* addrlen);

int Socket(int domain, int type, int protocol);
int Accept(int fd, struct sockaddr* addr, socklen_t* addrlen);
int Accept4(int fd, struct sockaddr* addr, socklen_t* addrlen, int flags);
int Connect(int fd, const struct sockaddr* addr, socklen_t addrlen);
int Listen(int fd, int backlog);
// Close of an fd the shim does not track (nginx closes the file it served,
// every request) is the table read and libc's close; CloseTracked, out of
// line, lets go of a socket's held bytes and folds its statistics first.
[[gnu::cold]] int CloseTracked(int fd, SocketState* s);
inline int Close(int fd) {
  SocketState* s = g_table.Lookup(fd);
  if (__builtin_expect(s == nullptr, 1)) return LoadSlot(g_real.close)(fd);
  return CloseTracked(fd, s);
}
int CloseRange(unsigned int first, unsigned int last, int flags);
int Shutdown(int fd, int how);
int Dup(int fd);
int Dup2(int old_fd, int new_fd);
int Dup3(int old_fd, int new_fd, int flags);
// Fcntl takes the variadic argument as one machine word, as the ABI passes it.
int Fcntl(int fd, int cmd, unsigned long arg);
int Fcntl64(int fd, int cmd, unsigned long arg);
int Setsockopt(int fd, int level, int name, const void* value, socklen_t len);
// Ioctl sees FIONBIO, the other way to set O_NONBLOCK (nginx uses it).
int Ioctl(int fd, unsigned long request, void* arg);

int Poll(struct pollfd* fds, nfds_t nfds, int timeout);
int Ppoll(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout, const sigset_t* mask);
int Select(int nfds, fd_set* r, fd_set* w, fd_set* e, struct timeval* timeout);
int Pselect(int nfds, fd_set* r, fd_set* w, fd_set* e, const struct timespec* timeout, const sigset_t* mask);
int EpollWait(int epfd, struct epoll_event* events, int maxevents, int timeout);
int EpollPwait(int epfd, struct epoll_event* events, int maxevents, int timeout, const sigset_t* mask);

// Fortified and newer waits.
int PollChk(struct pollfd* fds, nfds_t nfds, int timeout, size_t fdslen);
int PpollChk(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout, const sigset_t* mask, size_t fdslen);
int EpollPwait2(int epfd, struct epoll_event* events, int maxevents, const struct timespec* timeout,
                const sigset_t* mask);

// Syscall sees the fd calls programs make through syscall() (libuv closes
// with syscall(SYS_close)): closes, dups and new fds as their libc names
// would; a raw write goes after what the socket's policy holds.
long Syscall(long number, long a, long b, long c, long d, long e, long f);

// Closes the shim would otherwise not see, and stdio and splice on a
// socket, which the shim cannot order after held bytes.
int Fclose(FILE* stream);
void Closefrom(int first);
FILE* Fdopen(int fd, const char* mode);
ssize_t Splice(int fd_in, off64_t* off_in, int fd_out, off64_t* off_out, size_t len, unsigned int flags);

// NewFile, Pipe and NewStream note fds the kernel gave out (open, pipe,
// fopen...): an entry left on that number by an unseen close is retired,
// its held bytes never sent into the new file. Each returns its argument.
// NewFile is the table read inline (a failed call's -1 reads no entry);
// ForgetStale, out of line, retires the entry.
[[gnu::cold]] int ForgetStale(int fd);
inline int NewFile(int fd) {
  if (__builtin_expect(g_table.Lookup(fd) != nullptr, 0)) return ForgetStale(fd);
  return fd;
}
int Pipe(int fds[2], int result);
// Pipe2 is pipe2.
int Pipe2(int fds[2], int flags);
FILE* NewStream(FILE* stream);

// MemoryChanged follows munmap, mremap and mprotect: buffers confirmed
// readable before are checked again (user_memory.h). Returns result.
void* MemoryChanged(void* result);

// BeforeExec and BeforeExit send what policies hold before the process image
// is replaced (exec family, posix_spawn, system, popen) or ends (_exit).
void BeforeExec();
void BeforeExit();

}  // namespace hooks
}  // namespace tcpadvise

#endif  // TCPADVISE_HOOKS_H_
