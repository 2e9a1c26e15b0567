// Address: what the shim reads out of a socket address.
#ifndef TCPADVISE_ADDRESS_H_
#define TCPADVISE_ADDRESS_H_

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

namespace tcpadvise {

// PortOf is the port of an IPv4 or IPv6 address in host order; 0 for others
// and for nullptr.
inline uint16_t PortOf(const sockaddr* a) {
  if (a == nullptr) return 0;
  if (a->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port);
  if (a->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
  return 0;
}

// PortOf for a sockaddr_storage.
inline uint16_t PortOf(const sockaddr_storage& a) { return PortOf(reinterpret_cast<const sockaddr*>(&a)); }

// SocketCookie is the kernel's SO_COOKIE for fd's socket (see
// SocketIdentity::cookie); 0 when unknown. The caller keeps errno.
inline uint64_t SocketCookie(int fd) {
  uint64_t cookie = 0;
  socklen_t len = sizeof(cookie);
  if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0 || len != sizeof(cookie)) return 0;
  return cookie;
}

}  // namespace tcpadvise

#endif  // TCPADVISE_ADDRESS_H_
