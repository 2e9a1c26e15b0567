// tcpadvise-loadgen: the load generator behind `tcpadvise bench`. One binary
// holds the far end (`serve`) and the near end of every experiment of
// ../shared/seeds (pingpong, burst, rpc, stream); the near end prints one JSON
// document of raw samples and histograms, and the advisor does the statistics.
//
// Protocol, after connect: the near end sends one line "tcpadvise-loadgen/1
// rr REPLY_BYTES" or "tcpadvise-loadgen/1 sink INTERVAL_US", the far end
// answers "ok\n". In rr the near end sends messages whose last byte is
// kMessageEnd and every other byte 0, each only after the previous reply, so
// the far end knows a message is complete when a read ends in kMessageEnd (no
// header bytes to change segment counts); it answers REPLY_BYTES. In sink the
// far end reads and discards, noting (time, bytes) every INTERVAL_US. At end
// of file both send their own counts as one JSON line and close.
#ifndef TCPADVISE_BENCH_LOADGEN_H_
#define TCPADVISE_BENCH_LOADGEN_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "libtcpadvise/histogram.h"
#include "libtcpadvise/json_writer.h"

namespace loadgen {

constexpr char kHello[] = "tcpadvise-loadgen/1";
constexpr char kMessageEnd = 1;
constexpr long kMaxReplyBytes = 1 << 20;
// A far end that stops answering fails the run instead of hanging it.
constexpr int kReceiveTimeoutSeconds = 30;
constexpr int kHelloTimeoutSeconds = 3;

[[noreturn]] void Fail(const char* format, ...) __attribute__((format(printf, 1, 2)));

uint64_t NowNs();

// SocketSetup holds what the near end sets before connect.
struct SocketSetup {
  bool nodelay = false;
  int sndbuf = 0;  // 0: autotuned
};

// Connect opens a TCP connection to "HOST:PORT" ("[V6ADDR]:PORT" too).
int Connect(const std::string& target, const SocketSetup& setup);

// Listen binds a listening socket; port 0 picks a free one, returned in *bound_port.
int Listen(const std::string& host, int port, int* bound_port);

bool ReadExactly(int fd, char* buf, size_t n);
bool WriteAll(int fd, const char* buf, size_t n);
// ReadToEnd returns everything the peer sends until it closes.
std::string ReadToEnd(int fd);

// Histograms are the shim's own (libtcpadvise/histogram.h), written in the
// trace's form by its EmitHistogram, so the advisor reads both with one
// module (tcpadvise/model/hist.py).
using BytesHistogram = tcpadvise::BytesHistogram;
using NsHistogram = tcpadvise::TicksHistogram;
using tcpadvise::EmitHistogram;

// ---- the far end ----

int RunServe(const std::string& host, int port);

// ---- the near end ----

enum class SendMethod { kWrites, kWritev, kCork };

// Request is one message: the sizes of the writes that make it up.
struct Request {
  std::vector<long> pieces;
  long bytes() const;
};

struct RoundTripOptions {
  std::string mode;
  std::string target;
  SocketSetup setup;
  SendMethod method = SendMethod::kWrites;
  long reply_bytes = 1;
  long rounds = 200;
  long warmup = 2;              // discarded rounds before each request shape
  long connection_warmup = 16;  // more before the first: Linux quick-ACKs a new connection's first segments
  uint64_t budget_ns = 0;       // a shape stops measuring after this long (0: never)
  std::vector<std::string> sizes;  // request sizes: N, mss, mss+N, K*mss+N (burst: its one shape)
  long tail_bytes = 0;          // rpc: the request's last tail_bytes go as a second write
  int burst_writes = 0;         // burst: writes of burst_size bytes per request
  long burst_size = 0;
};

int RunRoundTrips(const RoundTripOptions& o);

struct StreamOptions {
  std::string target;
  SocketSetup setup;
  long write_bytes = 65536;
  double seconds = 1;
  long interval_us = 50000;
};

int RunStream(const StreamOptions& o);

}  // namespace loadgen

#endif  // TCPADVISE_BENCH_LOADGEN_H_
