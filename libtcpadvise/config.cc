#include "config.h"

#include <arpa/inet.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"

namespace tcpadvise {

static bool PortMatches(const PortRange& range, uint16_t port) {
  return !range.set || (port >= range.low && port <= range.high);
}

// PrefixMatches compares the first bits of two addresses.
static bool PrefixMatches(const unsigned char* a, const unsigned char* b, int bits) {
  const int whole = bits / 8, rest = bits % 8;
  if (memcmp(a, b, static_cast<size_t>(whole)) != 0) return false;
  if (rest == 0) return true;
  const unsigned char mask = static_cast<unsigned char>(0xff << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

static bool PeerMatches(const PolicyMatch& m, const sockaddr* peer) {
  if (!m.peer_set) return true;
  if (peer == nullptr) return false;
  unsigned char mapped[16];
  const unsigned char* addr = nullptr;
  sa_family_t family = peer->sa_family;
  if (family == AF_INET) {
    addr = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(peer)->sin_addr);
  } else if (family == AF_INET6) {
    const in6_addr& a6 = reinterpret_cast<const sockaddr_in6*>(peer)->sin6_addr;
    addr = a6.s6_addr;
    if (m.peer_family == AF_INET && IN6_IS_ADDR_V4MAPPED(&a6)) {
      // An IPv4 client of a dual-stack server matches IPv4 prefixes.
      memcpy(mapped, a6.s6_addr + 12, 4);
      addr = mapped;
      family = AF_INET;
    }
  }
  return addr != nullptr && family == m.peer_family && PrefixMatches(addr, m.peer_addr, m.peer_prefix_bits);
}

bool Matches(const PolicyMatch& m, const MatchInput& s) {
  return (m.program[0] == '\0' || fnmatch(m.program, s.program, 0) == 0) && (m.role == 0 || m.role == s.role) &&
         PortMatches(m.local_port, s.local_port) && PortMatches(m.peer_port, PortOf(s.peer)) && PeerMatches(m, s.peer);
}

int MatchRule(const PolicyConfig& config, const MatchInput& s) {
  for (int i = 0; i < config.rule_count; ++i) {
    if (!config.rules[i].experiment_arm && Matches(config.rules[i].match, s)) return i;
  }
  return -1;
}

bool ParsePeerPrefix(const char* text, PolicyMatch* match) {
  char address[INET6_ADDRSTRLEN + 8];
  if (strlen(text) >= sizeof(address)) return false;
  strcpy(address, text);
  int bits = -1;
  if (char* slash = strchr(address, '/')) {
    *slash = '\0';
    char* end = nullptr;
    const long parsed = strtol(slash + 1, &end, 10);
    if (end == slash + 1 || *end != '\0' || parsed < 0) return false;
    bits = static_cast<int>(parsed);
  }
  if (inet_pton(AF_INET, address, match->peer_addr) == 1) {
    match->peer_family = AF_INET;
    if (bits < 0) bits = 32;
    if (bits > 32) return false;
  } else if (inet_pton(AF_INET6, address, match->peer_addr) == 1) {
    match->peer_family = AF_INET6;
    if (bits < 0) bits = 128;
    if (bits > 128) return false;
  } else {
    return false;
  }
  match->peer_prefix_bits = static_cast<uint8_t>(bits);
  match->peer_set = true;
  return true;
}

bool SetBuiltinPolicy(const char* name, PolicySettings* settings) {
  PolicySettings s;
  if (strcmp(name, "nodelay") == 0) {
    s.nodelay = true;
  } else if (strcmp(name, "cork") == 0) {
    s.cork = true;
  } else if (strcmp(name, "coalesce") == 0) {
    s.coalesce = true;
  } else if (strcmp(name, "observe") != 0) {
    return false;
  }
  *settings = s;
  return true;
}

}  // namespace tcpadvise
