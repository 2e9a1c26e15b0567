// PolicyTestUtil: what the policy's unit tests share: a connected loopback
// TCP pair and a policy state on its client end, outside the shim (no
// preload; the heap is libc's).
#ifndef TCPADVISE_POLICY_TEST_UTIL_H_
#define TCPADVISE_POLICY_TEST_UTIL_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "address.h"
#include "policy.h"
#include "real_libc.h"
#include "runtime.h"

namespace tcpadvise {

// TcpPair is a connected loopback pair: client writes, server reads.
struct TcpPair {
  int client = -1, server = -1;
  TcpPair() {
    BindRealLibc();
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listener, 1);
    getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    client = socket(AF_INET, SOCK_STREAM, 0);
    connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    server = accept(listener, nullptr, nullptr);
    close(listener);
  }
  ~TcpPair() {
    if (client >= 0) close(client);
    if (server >= 0) close(server);
  }
  // ReadAvailable reads what arrives within timeout_ms.
  std::string ReadAvailable(int timeout_ms = 200) {
    std::string got;
    char buf[4096];
    pollfd pfd = {server, POLLIN, 0};
    while (poll(&pfd, 1, timeout_ms) > 0) {
      const ssize_t n = read(server, buf, sizeof(buf));
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
      timeout_ms = 20;
    }
    return got;
  }
};

// Passthrough is a hook's original call for PolicyWrite: a write of iov on fd.
struct Passthrough {
  int fd;
  iovec iov;
  static ssize_t Call(void* context) {
    auto* p = static_cast<Passthrough*>(context);
    return LibcWrite(p->fd, p->iov.iov_base, p->iov.iov_len);
  }
};

// PolicyFixture is a policy state for pair.client with settings.
struct PolicyFixture {
  TcpPair pair;
  PolicySettings settings;
  SocketState socket;
  PolicyState state;
  explicit PolicyFixture(bool coalesce) {
    // Once: a deadline thread a test started reads the rate.
    static const bool started = (g_runtime.tick_rate.Start(), true);
    (void)started;
    settings.coalesce = coalesce;
    settings.cork = !coalesce;
    settings.coalesce_max_bytes = 1000;
    state.settings = &settings;
    state.socket = &socket;
    state.fd.store(pair.client);
    state.cookie = SocketCookie(pair.client);
    socket.stats.policy = &state;
    socket.policy_state = &state;
    socket.stats.MakePolicyCounters();
  }
};

}  // namespace tcpadvise

#endif  // TCPADVISE_POLICY_TEST_UTIL_H_
