// forward_only: the floor of an LD_PRELOAD interposer on the calls a
// one-write-per-request server makes (issue 16): each wrapper looks its libc
// function up once (dlsym RTLD_NEXT, cached) and forwards, recording nothing.
// Built as forward_only/libtcpadvise.so, so that bench/server_instructions.py
// counts its instructions as the shim's:
//   server_instructions.py --shim build/bench/forward_only/libtcpadvise.so --arm observe
// (bench/results/hot-path-session12.md: 32-33 instructions a redis request).
#define _GNU_SOURCE
#include <dlfcn.h>
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
