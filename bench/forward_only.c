// forward_only: the floor of an LD_PRELOAD interposer on the calls a
// one-write-per-request server makes (issue 16): each wrapper looks its libc
// function up once (dlsym RTLD_NEXT, cached) and forwards, recording nothing.
// Built as forward_only/libtcpadvise.so, so that bench/server_instructions.py
// counts its instructions as the shim's:
//   server_instructions.py --shim build/bench/forward_only/libtcpadvise.so --arm observe
// (bench/results/hot-path-session12.md: 32-33 instructions a redis request).
// open and close too, which nginx calls for the file it serves each request.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define FORWARD(ret, name, params, args)                                              \
  ret name params {                                                                   \
    static ret(*real) params;                                                         \
    if (__builtin_expect(real == 0, 0)) real = (ret(*) params)dlsym(RTLD_NEXT, #name); \
    return real args;                                                                 \
  }

FORWARD(ssize_t, write, (int fd, const void* b, size_t n), (fd, b, n))
FORWARD(ssize_t, read, (int fd, void* b, size_t n), (fd, b, n))
FORWARD(ssize_t, writev, (int fd, const struct iovec* v, int n), (fd, v, n))
FORWARD(ssize_t, readv, (int fd, const struct iovec* v, int n), (fd, v, n))
FORWARD(ssize_t, send, (int fd, const void* b, size_t n, int f), (fd, b, n, f))
FORWARD(ssize_t, recv, (int fd, void* b, size_t n, int f), (fd, b, n, f))
FORWARD(ssize_t, sendmsg, (int fd, const struct msghdr* m, int f), (fd, m, f))
FORWARD(ssize_t, recvmsg, (int fd, struct msghdr* m, int f), (fd, m, f))
FORWARD(int, epoll_wait, (int e, struct epoll_event* ev, int n, int t), (e, ev, n, t))
FORWARD(int, close, (int fd), (fd))

// FORWARD_OPEN forwards an open that takes its mode only with O_CREAT or O_TMPFILE, as libc reads it.
#define FORWARD_OPEN(name, params, args)                                                          \
  int name params {                                                                               \
    static int (*real)params;                                                                     \
    mode_t mode = 0;                                                                              \
    if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) {                             \
      va_list ap;                                                                                 \
      va_start(ap, flags);                                                                        \
      mode = (mode_t)va_arg(ap, int);                                                             \
      va_end(ap);                                                                                 \
    }                                                                                             \
    if (__builtin_expect(real == 0, 0)) real = (int (*)params)dlsym(RTLD_NEXT, #name);            \
    return real args;                                                                             \
  }
FORWARD_OPEN(open, (const char* path, int flags, ...), (path, flags, mode))
FORWARD_OPEN(open64, (const char* path, int flags, ...), (path, flags, mode))
FORWARD_OPEN(openat, (int dir, const char* path, int flags, ...), (dir, path, flags, mode))
FORWARD_OPEN(openat64, (int dir, const char* path, int flags, ...), (dir, path, flags, mode))
