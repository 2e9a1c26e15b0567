// What the conformance driver (conform) and its peer (conform_peer) share:
// the bytes a connection carries, as a pure function of (stream, offset) so
// that another process (a forked or exec'd child) can send or account for
// its part; fixed-size self-checking records for cases whose order is not
// knowable; small JSON output; and socket helpers.
#ifndef TCPADVISE_CONFORM_COMMON_H_
#define TCPADVISE_CONFORM_COMMON_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

namespace conform {

// splitmix64's finalizer: a bijective 64-bit mixer.
uint64_t Mix(uint64_t x);

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  uint64_t Below(uint64_t n);  // uniform in [0, n), n > 0
  size_t Between(size_t lo, size_t hi);  // uniform in [lo, hi]
  // In [1, max], uniform in log2: as many 1-byte writes as 1 MB ones.
  size_t LogSize(size_t max);

 private:
  uint64_t state_;
};

// The stream's bytes [offset, offset + n).
void FillStream(uint64_t stream, uint64_t offset, uint8_t* out, size_t n);
// A stream id of its own for each connection of a case.
uint64_t StreamId(uint64_t seed, uint64_t index);

// conform_peer --request answers each request with the bytes it has
// received so far and the request's index, both 64-bit little-endian.
constexpr size_t kReplySize = 16;

void PutLe64(uint8_t* out, uint64_t v);
uint64_t Le64(const uint8_t* in);

// Records: 8 bytes of id, 8 bytes of Mix(id). A record split, merged or
// corrupted on the way fails the check.
constexpr size_t kRecordSize = 16;
void MakeRecord(uint64_t id, uint8_t out[kRecordSize]);

// An order-independent digest of a multiset of records (a sum of mixed ids),
// fed either with ids (the driver) or with raw bytes (the peer).
class RecordTally {
 public:
  void AddId(uint64_t id);
  void AddBytes(const uint8_t* data, size_t n);
  uint64_t count() const { return count_; }
  uint64_t bad() const { return bad_; }
  std::string HexDigest() const;

 private:
  uint64_t count_ = 0;
  uint64_t bad_ = 0;
  uint64_t sum_ = 0;
  uint8_t partial_[kRecordSize] = {};
  size_t partial_len_ = 0;
};

class JsonObject {
 public:
  JsonObject& Add(const char* key, long long value);
  JsonObject& Add(const char* key, const std::string& value);
  JsonObject& Add(const char* key, const char* value) { return Add(key, std::string(value)); }
  JsonObject& AddBool(const char* key, bool value);
  JsonObject& AddDouble(const char* key, double value);
  JsonObject& AddRaw(const char* key, const std::string& json);
  std::string Str() const { return "{" + body_ + "}"; }

 private:
  void Key(const char* key);
  std::string body_;
};

std::string JsonString(const std::string& s);
std::string JsonArray(const std::vector<std::string>& json_items);

// "EPIPE" for EPIPE; glibc's name for every errno.
std::string ErrnoName(int e);
// A call's outcome as text that is the same run to run: "0", "12", "-1 EPIPE".
// Pass the call itself, so that errno is read right after it returns.
std::string CallResult(long result);

int LocalPort(int fd);
int PeerPort(int fd);
double NowUs();
void SleepUs(long us);  // the whole time, even when signals arrive
[[noreturn]] void DieErrno(const char* what);

}  // namespace conform

#endif  // TCPADVISE_CONFORM_COMMON_H_
