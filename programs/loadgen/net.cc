// Sockets for both ends: connect, listen, whole reads and writes.
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"

namespace loadgen {

namespace {

void SplitTarget(const std::string& target, std::string* host, std::string* port) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon + 1 == target.size()) Fail("--target %s: expected HOST:PORT", target.c_str());
  *host = target.substr(0, colon);
  *port = target.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
}

addrinfo* Resolve(const std::string& host, const std::string& port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) Fail("%s:%s: %s", host.c_str(), port.c_str(), gai_strerror(rc));
  return found;
}

void SetInt(int fd, int level, int name, int value, const char* what) {
  if (setsockopt(fd, level, name, &value, sizeof(value)) != 0) Fail("setsockopt %s: %s", what, strerror(errno));
}

}  // namespace

void Fail(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fputs("tcpadvise-loadgen: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(1);
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

int Connect(const std::string& target, const SocketSetup& setup) {
  std::string host, port;
  SplitTarget(target, &host, &port);
  addrinfo* found = Resolve(host, port, 0);
  int fd = -1;
  int last_errno = 0;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    // Before connect: SO_SNDBUF set later would not change the window scale.
    if (setup.nodelay) SetInt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
    if (setup.sndbuf > 0) SetInt(fd, SOL_SOCKET, SO_SNDBUF, setup.sndbuf, "SO_SNDBUF");
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last_errno = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) Fail("connect to %s: %s", target.c_str(), strerror(last_errno));
  return fd;
}

int Listen(const std::string& host, int port, int* bound_port) {
  addrinfo* found = Resolve(host, std::to_string(port), AI_PASSIVE);
  const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd < 0) Fail("socket: %s", strerror(errno));
  SetInt(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
  if (bind(fd, found->ai_addr, found->ai_addrlen) != 0) Fail("bind %s port %d: %s", host.c_str(), port, strerror(errno));
  freeaddrinfo(found);
  if (listen(fd, 128) != 0) Fail("listen: %s", strerror(errno));
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

bool ReadExactly(int fd, char* buf, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteAll(int fd, const char* buf, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, buf, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    buf += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::string ReadToEnd(int fd) {
  std::string all;
  char buf[4096];
  for (;;) {
    const ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    all.append(buf, static_cast<size_t>(r));
  }
  return all;
}

}  // namespace loadgen
