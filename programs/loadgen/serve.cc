// The far end: answers each message (rr) or swallows a stream (sink), one
// thread per connection, and reports what it saw when the near end closes.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "loadgen.h"

namespace loadgen {

namespace {

constexpr size_t kReadBuffer = 256 * 1024;
constexpr size_t kMaxHelloLine = 128;

void SendReport(int fd, const tcpadvise::JsonWriter& w) {
  std::string line(w.data(), w.size());
  line += '\n';
  WriteAll(fd, line.data(), line.size());
}

// ServeRequests answers every message with reply_bytes; a message ends with
// the read whose last byte is kMessageEnd (see loadgen.h).
void ServeRequests(int fd, long reply_bytes) {
  std::vector<char> buf(kReadBuffer);
  const std::vector<char> reply(static_cast<size_t>(reply_bytes), 'r');
  BytesHistogram reads;
  uint64_t requests = 0, bytes = 0;
  for (;;) {
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    reads.Record(static_cast<uint64_t>(n));
    bytes += static_cast<uint64_t>(n);
    if (buf[static_cast<size_t>(n) - 1] == kMessageEnd) {
      if (!WriteAll(fd, reply.data(), reply.size())) return;
      ++requests;
    }
  }
  tcpadvise::JsonWriter w;
  w.BeginObject();
  w.Key("requests");
  w.Uint(requests);
  w.Key("bytes");
  w.Uint(bytes);
  EmitHistogram(&w, "reads", "bytes", reads);
  w.EndObject();
  SendReport(fd, w);
}

// ServeSink reads and discards, noting (ns since the hello, bytes so far)
// at the first read after each interval: the receiver's view of throughput.
void ServeSink(int fd, long interval_us) {
  std::vector<char> buf(kReadBuffer);
  BytesHistogram reads;
  std::vector<std::pair<uint64_t, uint64_t>> ticks;
  const uint64_t start = NowNs(), interval = static_cast<uint64_t>(interval_us) * 1000;
  uint64_t bytes = 0, next_tick = start + interval, now = start;
  for (;;) {
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    reads.Record(static_cast<uint64_t>(n));
    bytes += static_cast<uint64_t>(n);
    now = NowNs();
    if (now >= next_tick) {
      ticks.emplace_back(now - start, bytes);
      next_tick = now + interval;
    }
  }
  tcpadvise::JsonWriter w;
  w.BeginObject();
  w.Key("bytes");
  w.Uint(bytes);
  w.Key("end_ns");
  w.Uint(now - start);
  EmitHistogram(&w, "reads", "bytes", reads);
  w.Key("ticks");
  w.BeginArray();
  for (const auto& tick : ticks) {
    w.BeginArray();
    w.Uint(tick.first);
    w.Uint(tick.second);
    w.EndArray();
  }
  w.EndArray();
  w.EndObject();
  SendReport(fd, w);
}

// ReadHelloLine reads one line byte by byte: the near end waits for "ok"
// before sending more, so nothing after the newline can be lost.
bool ReadHelloLine(int fd, std::string* line) {
  char c;
  while (line->size() < kMaxHelloLine) {
    if (read(fd, &c, 1) != 1) return false;
    if (c == '\n') return true;
    *line += c;
  }
  return false;
}

void* ServeConnection(void* arg) {
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(arg));
  std::string hello;
  char kind[8] = {};
  char version[32] = {};
  long value = 0;
  if (ReadHelloLine(fd, &hello) && sscanf(hello.c_str(), "%31s %7s %ld", version, kind, &value) == 3 &&
      strcmp(version, kHello) == 0 && WriteAll(fd, "ok\n", 3)) {
    if (strcmp(kind, "rr") == 0 && value >= 1 && value <= kMaxReplyBytes) ServeRequests(fd, value);
    if (strcmp(kind, "sink") == 0 && value >= 1000) ServeSink(fd, value);
  }
  close(fd);
  return nullptr;
}

}  // namespace

int RunServe(const std::string& host, int port) {
  // The far end lives as long as whoever started it (tcpadvise bench, bench-server),
  // even when that one is killed before it can stop us.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  int bound_port = 0;
  const int listener = Listen(host, port, &bound_port);
  printf("listening %d\n", bound_port);
  fflush(stdout);
  signal(SIGPIPE, SIG_IGN);
  for (;;) {
    const int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) {
      // Out of descriptors or memory: wait for connections to end instead of spinning.
      if (errno != EINTR && errno != ECONNABORTED) usleep(10000);
      continue;
    }
    pthread_t thread;
    if (pthread_create(&thread, nullptr, ServeConnection, reinterpret_cast<void*>(static_cast<intptr_t>(fd))) != 0) {
      close(fd);
      continue;
    }
    pthread_detach(thread);
  }
}

}  // namespace loadgen
