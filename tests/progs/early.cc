// early: a library whose constructor runs before the shim's (preloaded after
// it, so initialized first) and calls the hooked functions the shim has not
// bound yet: write first (a slot that holds its binding stub), then a
// socketpair, a write and a read on it. Prints "first" and the echoed "early".
#include <sys/socket.h>
#include <unistd.h>

__attribute__((constructor)) static void Early() {
  (void)!write(1, "first\n", 6);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) _exit(3);
  char buf[8];
  if (write(sv[0], "early\n", 6) != 6) _exit(4);
  const ssize_t n = read(sv[1], buf, sizeof(buf));
  if (n != 6) _exit(5);
  (void)!write(1, buf, n);
}
