#include "real_libc.h"

#include <dlfcn.h>
#include <pthread.h>

namespace tcpadvise {

// g_real is constant-initialized (__constinit: a build error otherwise): the hot slots
// hold BindFirst before any code runs, a hook called before any constructor too.
__constinit RealLibc g_real{};

template <typename Fn>
static void Bind(Fn& slot, const char* name) {
  slot = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
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
  Bind(g_real.sigprocmask, "sigprocmask");
  Bind(g_real.signal, "signal");
  Bind(g_real.bsd_signal, "bsd_signal");
  Bind(g_real.sysv_signal, "sysv_signal");
  Bind(g_real.sigset, "sigset");
}

void BindRealLibc() {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, BindAll);
}

}  // namespace tcpadvise
