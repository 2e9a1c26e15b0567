// Histogram: a log-linear histogram in the style of HdrHistogram, exact where
// it matters and small where most sockets are. Each power of two holds 128
// buckets, so a bucket's low edge is within 1/128 (0.8%) of every value in
// it, and values below 256 have a bucket each (exact). Count, min, max and
// sum are exact. The buckets are SparseCounters: the few distinct buckets
// most sockets use sit inline, a histogram that outgrows them grows small
// (bucket, count) tables (64 B for the next 4 to 8 buckets, up to about 240
// buckets in 1.7 KB), and only one that uses more allocates chunks of 128
// buckets (one power of two). Thread rules are SparseCounters'
// (sparse_counters.h).
#ifndef TCPADVISE_HISTOGRAM_H_
#define TCPADVISE_HISTOGRAM_H_

#include <stdint.h>

#include "counter.h"
#include "sparse_counters.h"

namespace tcpadvise {

class JsonWriter;

// kHistogramSubBucketBits: 2^7 buckets per power of two.
constexpr int kHistogramSubBucketBits = 7;
constexpr int kHistogramSubBuckets = 1 << kHistogramSubBucketBits;
// kHistogramBuckets covers every uint64_t value.
constexpr int kHistogramBuckets = (64 - kHistogramSubBucketBits + 1) * kHistogramSubBuckets;

// HistogramBucketOf maps a value to its bucket: the value itself below 256,
// then 128 buckets per power of two. Branch-free: one count-leading-zeros.
inline int HistogramBucketOf(uint64_t value) {
  const int msb = 63 - __builtin_clzll(value | kHistogramSubBuckets);
  const int shift = msb - kHistogramSubBucketBits;
  return (shift << kHistogramSubBucketBits) + static_cast<int>(value >> shift);
}

// HistogramBucketLow is the smallest value in bucket b.
inline uint64_t HistogramBucketLow(int bucket) {
  if (bucket < 2 * kHistogramSubBuckets) return static_cast<uint64_t>(bucket);
  const int shift = (bucket >> kHistogramSubBucketBits) - 1;
  return static_cast<uint64_t>(bucket - (shift << kHistogramSubBucketBits)) << shift;
}

// HistogramBucketHigh is one past the largest value in bucket b (saturated
// at 2^64-1 for the last bucket).
uint64_t HistogramBucketHigh(int bucket);

// HistogramSummary is what a histogram knows exactly.
struct HistogramSummary {
  uint64_t count = 0;
  uint64_t min = 0;  // 0 when empty
  uint64_t max = 0;
  uint64_t sum = 0;  // wraps modulo 2^64: enough for any socket's bytes and ticks
};

// Histogram records uint64_t values, in one cache line until it outgrows its
// inline buckets.
class alignas(64) Histogram {
 public:
  // kInlineBuckets: distinct buckets kept without allocating. Three fill
  // the line with the exact figures; most sockets' histograms see one or two.
  static constexpr int kInlineBuckets = 3;

  // Histogram::Record adds n (> 0, a sampled value's weight) values of
  // value.
  [[gnu::always_inline]] void Record(uint64_t value, uint64_t n = 1) {
    RecordBounds(value, n);
    buckets_.Add(HistogramBucketOf(value), n);
  }

  // Histogram::RecordRepeated adds n (> 0) values of value: out of line.
  void RecordRepeated(uint64_t value, uint64_t n);

  // Histogram::RecordBounds adds n values of value to the sum, min and max
  // only: for a histogram whose buckets are, for now, another's (SocketStats).
  [[gnu::always_inline]] void RecordBounds(uint64_t value, uint64_t n = 1) {
    sum_.Add(value * n);
    if (~value > min_inverted_.Get()) min_inverted_.Set(~value);
    if (value > max_.Get()) max_.Set(value);
  }

  // Histogram::MergeFrom adds every value of other.
  void MergeFrom(const Histogram& other) {
    MergeBoundsFrom(other);
    MergeBucketsFrom(other);
  }
  // Histogram::MergeBoundsFrom adds other's sum, min and max.
  void MergeBoundsFrom(const Histogram& other);
  // Histogram::MergeBucketsFrom adds other's bucket counts (and unbucketed
  // values), except_n less in bucket `except` (-1: none).
  void MergeBucketsFrom(const Histogram& other, int except = -1, uint64_t except_n = 1);

  // Histogram::Reset empties the histogram (its tables and chunks stay allocated).
  void Reset();

  // Histogram::Summary is the exact count, bounds and sum.
  HistogramSummary Summary() const { return SummaryOver(*this); }
  // Histogram::SummaryOver is this histogram's bounds and sum with the count
  // of `buckets`, the histogram that holds its buckets.
  HistogramSummary SummaryOver(const Histogram& buckets) const;
  uint64_t count() const { return buckets_.Total(); }

  // Histogram::Percentile is the q-quantile (0..1), a value of the bucket
  // that holds it, so within 0.8% of the true one and exact below 256: max
  // in max's bucket (unless min shares it), else the bucket's low edge
  // clamped to [min, max]. So a bucket that holds one distinct value reads
  // exactly at either end. 0 when empty.
  uint64_t Percentile(double q) const;

  // Histogram::ForEachBucket calls fn(bucket, count) for each non-empty
  // bucket in ascending order.
  template <typename Fn>
  void ForEachBucket(Fn fn) const {
    buckets_.ForEach(fn);
  }

  // Histogram::unbucketed counts values that are in count, sum, min and
  // max but in no bucket (memory ran out).
  uint64_t unbucketed() const { return buckets_.lost(); }

  // Histogram::HeapBytes is what the histogram allocated beyond itself.
  uint64_t HeapBytes() const { return buckets_.HeapBytes(); }

 private:
  Counter sum_;
  // ~min, so that a zeroed histogram is empty and a smaller value is larger.
  Counter min_inverted_;
  Counter max_;
  SparseCounters<kInlineBuckets, kHistogramBuckets> buckets_;
};
static_assert(sizeof(Histogram) == 64, "a histogram is one cache line");

// The units the shim records, for readers of SocketStats: sizes in bytes,
// counts, and durations in clock ticks.
using BytesHistogram = Histogram;
using CountHistogram = Histogram;
using TicksHistogram = Histogram;

// EmitHistogram writes h as the trace's histogram object under key: exact
// count, sum, min and max (times scale, e.g. nanoseconds per tick), and the
// non-empty buckets as [index, count] pairs (docs in
// advisor/tcpadvise/schemas/trace-1.schema.json). extra_count adds that
// many values of extra_value that h does not hold (counted elsewhere, or a
// live socket's unfinished burst), without touching h.
void EmitHistogram(JsonWriter* w, const char* key, const char* unit, const Histogram& h, double scale = 1.0,
                   uint64_t extra_count = 0, uint64_t extra_value = 1);

// EmitHistogramOver writes h, whose buckets are those of `buckets`
// (SocketStats), the same way: h's sum, min and max, the count and buckets
// of `buckets`. extra_count values of extra_value are added to the bounds
// and sum only: `buckets` already holds them.
void EmitHistogramOver(JsonWriter* w, const char* key, const char* unit, const Histogram& h, const Histogram& buckets,
                       double scale = 1.0, uint64_t extra_count = 0, uint64_t extra_value = 1);

}  // namespace tcpadvise

#endif  // TCPADVISE_HISTOGRAM_H_
