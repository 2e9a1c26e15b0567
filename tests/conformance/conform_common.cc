#include "conform_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

namespace conform {

uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Rng::Next() { return Mix(state_ += 0x9e3779b97f4a7c15ULL); }

uint64_t Rng::Below(uint64_t n) { return Next() % n; }

size_t Rng::Between(size_t lo, size_t hi) { return lo + Below(hi - lo + 1); }

size_t Rng::LogSize(size_t max) {
  int bits = 0;
  while ((size_t{1} << (bits + 1)) <= max) ++bits;
  const int exponent = static_cast<int>(Below(static_cast<uint64_t>(bits) + 1));
  const size_t lo = size_t{1} << exponent;
  const size_t hi = exponent == bits ? max : 2 * lo - 1;
  return Between(lo, hi);
}

void FillStream(uint64_t stream, uint64_t offset, uint8_t* out, size_t n) {
  // Eight bytes per mixed word, so any offset can be produced directly.
  for (size_t i = 0; i < n;) {
    const uint64_t at = offset + i;
    const uint64_t word = Mix(stream ^ Mix(at / 8));
    for (uint64_t b = at % 8; b < 8 && i < n; ++b, ++i) out[i] = static_cast<uint8_t>(word >> (8 * b));
  }
}

uint64_t StreamId(uint64_t seed, uint64_t index) { return Mix(Mix(seed) + index); }

void PutLe64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t Le64(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | in[i];
  return v;
}

namespace {

// Keeps the digest term of a record apart from the record's own check word.
constexpr uint64_t kDigestSalt = 0x5f3759df5f3759dfULL;

}  // namespace

void MakeRecord(uint64_t id, uint8_t out[kRecordSize]) {
  PutLe64(out, id);
  PutLe64(out + 8, Mix(id));
}

void RecordTally::AddId(uint64_t id) {
  ++count_;
  sum_ += Mix(id ^ kDigestSalt);
}

void RecordTally::AddBytes(const uint8_t* data, size_t n) {
  while (n > 0) {
    const size_t take = n < kRecordSize - partial_len_ ? n : kRecordSize - partial_len_;
    memcpy(partial_ + partial_len_, data, take);
    partial_len_ += take;
    data += take;
    n -= take;
    if (partial_len_ < kRecordSize) return;
    partial_len_ = 0;
    const uint64_t id = Le64(partial_);
    if (Le64(partial_ + 8) == Mix(id)) {
      AddId(id);
    } else {
      ++bad_;
    }
  }
}

std::string RecordTally::HexDigest() const {
  char hex[17];
  snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(sum_));
  return hex;
}

void JsonObject::Key(const char* key) {
  if (!body_.empty()) body_ += ", ";
  body_ += JsonString(key) + ": ";
}

JsonObject& JsonObject::Add(const char* key, long long value) { return AddRaw(key, std::to_string(value)); }

JsonObject& JsonObject::Add(const char* key, const std::string& value) { return AddRaw(key, JsonString(value)); }

JsonObject& JsonObject::AddBool(const char* key, bool value) { return AddRaw(key, value ? "true" : "false"); }

JsonObject& JsonObject::AddDouble(const char* key, double value) {
  char text[64];
  snprintf(text, sizeof(text), "%.1f", value);
  return AddRaw(key, text);
}

JsonObject& JsonObject::AddRaw(const char* key, const std::string& json) {
  Key(key);
  body_ += json;
  return *this;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string JsonArray(const std::vector<std::string>& json_items) {
  std::string out = "[";
  for (size_t i = 0; i < json_items.size(); ++i) out += (i ? ", " : "") + json_items[i];
  return out + "]";
}

std::string ErrnoName(int e) {
  const char* name = strerrorname_np(e);
  return name ? name : "errno " + std::to_string(e);
}

std::string CallResult(long result) {
  if (result >= 0) return std::to_string(result);
  return std::to_string(result) + " " + ErrnoName(errno);
}

namespace {

int PortOf(int fd, int (*get)(int, sockaddr*, socklen_t*)) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (get(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) DieErrno("getsockname/getpeername");
  return ntohs(addr.sin_port);
}

}  // namespace

int LocalPort(int fd) { return PortOf(fd, getsockname); }

int PeerPort(int fd) { return PortOf(fd, getpeername); }

double NowUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void SleepUs(long us) {
  timespec left = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

void DieErrno(const char* what) {
  fprintf(stderr, "conform: %s: %s\n", what, ErrnoName(errno).c_str());
  exit(1);
}

}  // namespace conform
