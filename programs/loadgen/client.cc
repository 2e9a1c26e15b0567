// The near end: round trips of messages of given shapes (pingpong, burst,
// rpc) and a timed stream, each printing raw samples and the far end's counts.
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>

#include "libtcpadvise/tcp_info.h"
#include "loadgen.h"

namespace loadgen {

namespace {

void SetReceiveTimeout(int fd, int seconds) {
  timeval timeout{seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
}

void Hello(int fd, const std::string& target, const std::string& request) {
  const std::string line = std::string(kHello) + " " + request + "\n";
  char answer[3];
  // A bench-server answers at once; anything else may never answer at all.
  SetReceiveTimeout(fd, kHelloTimeoutSeconds);
  if (!WriteAll(fd, line.data(), line.size()) || !ReadExactly(fd, answer, sizeof(answer)) ||
      memcmp(answer, "ok\n", sizeof(answer)) != 0) {
    Fail("%s is not a tcpadvise bench-server (no answer to the hello)", target.c_str());
  }
  SetReceiveTimeout(fd, kReceiveTimeoutSeconds);
}

// ResolveSize reads N, mss, mss+N, mss-N, K*mss or K*mss+N.
long ResolveSize(const std::string& token, long mss) {
  const size_t at = token.find("mss");
  char* end = nullptr;
  if (at == std::string::npos) {
    const long n = strtol(token.c_str(), &end, 10);
    if (*end != '\0' || n < 1) Fail("bad size %s", token.c_str());
    return n;
  }
  long multiple = 1, offset = 0;
  if (at > 0) {
    multiple = strtol(token.c_str(), &end, 10);
    if (end != token.c_str() + at - 1 || *end != '*') Fail("bad size %s", token.c_str());
  }
  const std::string rest = token.substr(at + 3);
  if (!rest.empty()) {
    offset = strtol(rest.c_str(), &end, 10);
    if (*end != '\0' || (rest[0] != '+' && rest[0] != '-')) Fail("bad size %s", token.c_str());
  }
  const long n = multiple * mss + offset;
  if (n < 1) Fail("size %s is %ld bytes here", token.c_str(), n);
  return n;
}

// Shape splits a request of `size` bytes into the writes the mode sends it as.
Request Shape(const RoundTripOptions& o, long size) {
  Request r;
  if (o.burst_writes > 0) {
    r.pieces.assign(static_cast<size_t>(o.burst_writes), o.burst_size);
  } else if (o.tail_bytes > 0 && size > o.tail_bytes) {
    r.pieces = {size - o.tail_bytes, o.tail_bytes};
  } else {
    r.pieces = {size};
  }
  return r;
}

void SetCork(int fd, int on) { setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on)); }

bool WritevAll(int fd, std::vector<iovec> iov) {
  size_t first = 0;
  while (first < iov.size()) {
    ssize_t w = writev(fd, &iov[first], static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX)));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    for (; first < iov.size() && static_cast<size_t>(w) >= iov[first].iov_len; ++first) w -= iov[first].iov_len;
    if (first < iov.size()) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + w;
      iov[first].iov_len -= static_cast<size_t>(w);
    }
  }
  return true;
}

// Send writes one request from `message` (its bytes() long, ending in kMessageEnd).
bool Send(int fd, SendMethod method, const Request& request, const char* message) {
  if (method == SendMethod::kWritev) {
    std::vector<iovec> iov;
    const char* at = message;
    for (long piece : request.pieces) {
      iov.push_back({const_cast<char*>(at), static_cast<size_t>(piece)});
      at += piece;
    }
    return WritevAll(fd, std::move(iov));
  }
  if (method == SendMethod::kCork) SetCork(fd, 1);
  for (long piece : request.pieces) {
    if (!WriteAll(fd, message, static_cast<size_t>(piece))) return false;
    message += piece;
  }
  if (method == SendMethod::kCork) SetCork(fd, 0);
  return true;
}

void EmitTcpInfo(tcpadvise::JsonWriter* w, const tcpadvise::TcpInfoSummary& info) {
  w->Key("tcp_info");
  w->BeginObject();
  w->Key("snd_mss");
  w->Uint(info.snd_mss);
  w->Key("rtt_us");
  w->Uint(info.rtt_us_sum);
  w->Key("data_segs_out");
  w->Uint(info.data_segs_out);
  w->Key("total_retrans");
  w->Uint(info.total_retrans);
  w->Key("sndbuf_limited_us");
  w->Uint(info.sndbuf_limited_us);
  w->Key("delivery_rate");
  w->Uint(info.delivery_rate);
  w->EndObject();
}

tcpadvise::TcpInfoSummary TcpInfo(int fd) {
  tcpadvise::TcpInfoSummary info;
  tcpadvise::ReadTcpInfo(fd, &info);
  return info;
}

void EmitSetup(tcpadvise::JsonWriter* w, int fd, const SocketSetup& setup) {
  tcpadvise::KernelOptions options;
  tcpadvise::ReadKernelOptions(fd, &options);
  w->Key("nodelay");
  w->Bool(setup.nodelay);
  w->Key("sndbuf_set");
  w->Uint(static_cast<uint64_t>(setup.sndbuf));
  w->Key("sndbuf");  // what the kernel made of it (it doubles the value set)
  w->Uint(static_cast<uint64_t>(options.sndbuf));
}

[[noreturn]] void FailReading(int error) {
  if (error == EAGAIN || error == EWOULDBLOCK) Fail("no reply from the far end in %d s", kReceiveTimeoutSeconds);
  Fail("read reply: %s", error ? strerror(error) : "the far end closed the connection");
}

// ReadFarReport ends the conversation and returns the far end's report line,
// which it sends once it has read everything.
std::string ReadFarReport(int fd) {
  if (shutdown(fd, SHUT_WR) != 0) Fail("shutdown: %s", strerror(errno));
  std::string far = ReadToEnd(fd);
  while (!far.empty() && far.back() == '\n') far.pop_back();
  if (far.empty() || far.front() != '{') Fail("the far end closed without its report");
  return far;
}

// Print prints {"near": ..., "far": ...}: our document and the far end's report.
void Print(const tcpadvise::JsonWriter& near, const std::string& far) {
  if (near.failed()) Fail("out of memory writing the results");
  const std::string line = "{\"near\": " + std::string(near.data(), near.size()) + ", \"far\": " + far + "}";
  fwrite(line.data(), 1, line.size(), stdout);
  fputc('\n', stdout);
  fflush(stdout);
}

}  // namespace

long Request::bytes() const {
  long total = 0;
  for (long piece : pieces) total += piece;
  return total;
}

int RunRoundTrips(const RoundTripOptions& o) {
  const int fd = Connect(o.target, o.setup);
  Hello(fd, o.target, "rr " + std::to_string(o.reply_bytes));
  std::vector<char> reply(static_cast<size_t>(o.reply_bytes));

  tcpadvise::JsonWriter w;
  w.BeginObject();
  w.Key("mode");
  w.String(o.mode.c_str());
  w.Key("reply_bytes");
  w.Int(o.reply_bytes);
  EmitSetup(&w, fd, o.setup);
  w.Key("points");
  w.BeginArray();
  bool first = true;
  for (const std::string& size : o.sizes) {
    // The segment size grows while the peer's window does (Linux bounds it
    // to half the largest window seen), so "mss" is read when its point starts.
    const long mss = static_cast<long>(TcpInfo(fd).snd_mss);
    const Request request = Shape(o, ResolveSize(size, mss));
    std::vector<char> message(static_cast<size_t>(request.bytes()), 0);
    message.back() = kMessageEnd;
    const long warmup = o.warmup + (first ? o.connection_warmup : 0);
    first = false;
    std::vector<uint64_t> round_ns;
    round_ns.reserve(static_cast<size_t>(warmup + o.rounds));
    tcpadvise::TcpInfoSummary before;
    uint64_t measuring_since = 0;
    for (long i = 0; i < warmup + o.rounds; ++i) {
      if (i == warmup) {
        before = TcpInfo(fd);
        measuring_since = NowNs();
      } else if (i > warmup && o.budget_ns > 0 && NowNs() - measuring_since > o.budget_ns) {
        break;
      }
      const uint64_t start = NowNs();
      if (!Send(fd, o.method, request, message.data())) Fail("write: %s", strerror(errno));
      errno = 0;  // stays 0 when the far end closes
      if (!ReadExactly(fd, reply.data(), reply.size())) FailReading(errno);
      round_ns.push_back(NowNs() - start);
    }
    const tcpadvise::TcpInfoSummary after = TcpInfo(fd);
    w.BeginObject();
    w.Key("mss");
    w.Int(mss);
    w.Key("request_bytes");
    w.Int(request.bytes());
    w.Key("writes");
    w.Uint(request.pieces.size());
    w.Key("warmup");
    w.Int(warmup);
    w.Key("data_segs_out");  // over the measured rounds
    w.Uint(after.data_segs_out - before.data_segs_out);
    w.Key("total_retrans");
    w.Uint(after.total_retrans - before.total_retrans);
    w.Key("round_ns");
    w.BeginArray();
    for (uint64_t ns : round_ns) w.Uint(ns);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  Print(w, ReadFarReport(fd));
  close(fd);
  return 0;
}

int RunStream(const StreamOptions& o) {
  const int fd = Connect(o.target, o.setup);
  Hello(fd, o.target, "sink " + std::to_string(o.interval_us));
  const std::vector<char> message(static_cast<size_t>(o.write_bytes), 'x');
  NsHistogram write_ns;
  uint64_t writes = 0;
  const uint64_t start = NowNs(), stop = start + static_cast<uint64_t>(o.seconds * 1e9);
  for (uint64_t now = start; now < stop;) {
    if (!WriteAll(fd, message.data(), message.size())) Fail("write: %s", strerror(errno));
    const uint64_t done = NowNs();
    write_ns.Record(done - now);
    ++writes;
    now = done;
  }
  const uint64_t elapsed = NowNs() - start;
  // After the far end has read everything, so that tcp_info counts every segment.
  const std::string far = ReadFarReport(fd);
  tcpadvise::JsonWriter w;
  w.BeginObject();
  w.Key("mode");
  w.String("stream");
  w.Key("write_bytes");
  w.Int(o.write_bytes);
  EmitSetup(&w, fd, o.setup);
  w.Key("writes");
  w.Uint(writes);
  w.Key("elapsed_ns");
  w.Uint(elapsed);
  EmitHistogram(&w, "write_ns", "ns", write_ns);
  EmitTcpInfo(&w, TcpInfo(fd));
  w.EndObject();
  Print(w, far);
  close(fd);
  return 0;
}

}  // namespace loadgen
