// conform_peer: the trusted end of the conformance suite; it always runs
// without the shim. It accepts connections on 127.0.0.1 and prints one JSON
// line per connection when it ends: the client's port (how the tests match
// it with the driver's connection), the bytes received and their SHA-256,
// and, when asked, the multiset digest of the records in them.
//
//   conform_peer [--slow] [--request] [--close-after BYTES] [--records]
//
//   --slow         a tiny receive buffer and a pause before every small read,
//                  so that a non-blocking sender meets EAGAIN and short writes
//   --request      requests are a 4-byte little-endian length and that many
//                  bytes; each gets a 16-byte reply: the bytes received so far
//                  and the request's index, both 64-bit little-endian
//   --close-after  read exactly BYTES, then close (the peer going away)
//   --records      also report the records' count, bad ones and digest
//   --stall-first MS  read nothing of the first connection for MS ms (a
//                  peer that does not read: its sender blocks)
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conform_common.h"
#include "sha256.h"

namespace conform {
namespace {

struct Options {
  bool slow = false;
  bool request = false;
  long close_after = -1;
  bool records = false;
  long stall_first_ms = 0;
};

std::atomic<int> g_accepted{0};

constexpr int kSlowBuffer = 4096;
constexpr long kSlowPauseUs = 200;

std::mutex g_stdout;

// What one connection delivered.
class Received {
 public:
  explicit Received(bool records) : records_(records) {}

  void Take(const uint8_t* data, size_t n) {
    hash_.Update(data, n);
    bytes_ += n;
    if (records_) tally_.AddBytes(data, n);
  }
  uint64_t bytes() const { return bytes_; }

  std::string Json(int port, const std::string& read_error) const {
    JsonObject o;
    o.Add("port", port).Add("bytes", static_cast<long long>(bytes_)).Add("sha256", hash_.HexDigest());
    if (records_) {
      o.Add("records", static_cast<long long>(tally_.count()))
          .Add("bad_records", static_cast<long long>(tally_.bad()))
          .Add("record_digest", tally_.HexDigest());
    }
    if (!read_error.empty()) o.Add("read_error", read_error);
    return o.Str();
  }

 private:
  bool records_;
  Sha256 hash_;
  uint64_t bytes_ = 0;
  RecordTally tally_;
};

// Reads up to n bytes into buf and received: what read returned, with error
// set when it failed.
ssize_t ReadSome(int fd, uint8_t* buf, size_t n, Received* received, std::string* error) {
  const ssize_t r = read(fd, buf, n);
  if (r > 0) received->Take(buf, static_cast<size_t>(r));
  if (r < 0) *error = ErrnoName(errno);
  return r;
}

bool ReadExactly(int fd, uint8_t* buf, size_t n, Received* received, std::string* error) {
  for (size_t got = 0; got < n;) {
    const ssize_t r = ReadSome(fd, buf + got, n - got, received, error);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

void AnswerRequests(int fd, Received* received, std::string* error) {
  std::vector<uint8_t> body;
  for (uint64_t index = 0;; ++index) {
    uint8_t header[4];
    if (!ReadExactly(fd, header, sizeof(header), received, error)) return;
    body.resize(uint32_t{header[0]} | uint32_t{header[1]} << 8 | uint32_t{header[2]} << 16 |
                uint32_t{header[3]} << 24);
    if (!ReadExactly(fd, body.data(), body.size(), received, error)) return;
    uint8_t reply[kReplySize];
    PutLe64(reply, received->bytes());
    PutLe64(reply + 8, index);
    if (send(fd, reply, sizeof(reply), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(reply))) return;
  }
}

void Serve(int fd, const Options& o, bool first) {
  if (first && o.stall_first_ms > 0) SleepUs(o.stall_first_ms * 1000);
  Received received(o.records);
  std::string error;
  std::vector<uint8_t> buf(o.slow ? kSlowBuffer : 1 << 16);
  if (o.request) {
    AnswerRequests(fd, &received, &error);
  } else if (o.close_after >= 0) {
    std::vector<uint8_t> wanted(static_cast<size_t>(o.close_after));
    ReadExactly(fd, wanted.data(), wanted.size(), &received, &error);
  } else {
    do {
      if (o.slow) SleepUs(kSlowPauseUs);
    } while (ReadSome(fd, buf.data(), buf.size(), &received, &error) > 0);
  }
  const std::string line = received.Json(PeerPort(fd), error);
  close(fd);
  std::lock_guard<std::mutex> lock(g_stdout);
  printf("%s\n", line.c_str());
  fflush(stdout);
}

[[noreturn]] void Usage() {
  fprintf(stderr, "usage: conform_peer [--slow] [--request] [--close-after BYTES] [--records] [--stall-first MS]\n");
  exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--slow") o.slow = true;
    else if (a == "--request") o.request = true;
    else if (a == "--records") o.records = true;
    else if (a == "--close-after" && i + 1 < argc) o.close_after = atol(argv[++i]);
    else if (a == "--stall-first" && i + 1 < argc) o.stall_first_ms = atol(argv[++i]);
    else Usage();
  }
  return o;
}

void SetOption(int fd, int level, int name, int value) {
  if (setsockopt(fd, level, name, &value, sizeof(value)) != 0) DieErrno("setsockopt");
}

}  // namespace
}  // namespace conform

int main(int argc, char** argv) {
  using namespace conform;
  const Options o = Parse(argc, argv);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) DieErrno("socket");
  SetOption(listener, SOL_SOCKET, SO_REUSEADDR, 1);
  // Set on the listener so that accepted sockets have them from their first
  // byte: urgent data stays in the byte stream, and a slow reader's window
  // is small from the start.
  SetOption(listener, SOL_SOCKET, SO_OOBINLINE, 1);
  if (o.slow) SetOption(listener, SOL_SOCKET, SO_RCVBUF, kSlowBuffer);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) DieErrno("bind");
  if (listen(listener, 128) != 0) DieErrno("listen");
  printf("listening %d\n", LocalPort(listener));
  fflush(stdout);
  // Runs until the test terminates it.
  for (;;) {
    const int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      DieErrno("accept");
    }
    std::thread(Serve, fd, o, g_accepted.fetch_add(1) == 0).detach();
  }
}
