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

// SocketAddress holds a TCP socket's IPv4 or IPv6 address: 28 bytes where a
// sockaddr_storage takes 128, twice in every socket's state. ss_family
// overlays the family field every member starts with; in6, the largest,
// comes first so that SocketAddress{} zeroes every byte.
union SocketAddress {
  sockaddr_in6 in6;
  sockaddr_in in4;
  sockaddr sa;
  sa_family_t ss_family;
};

// PortOf for a SocketAddress.
inline uint16_t PortOf(const SocketAddress& a) { return PortOf(&a.sa); }

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
