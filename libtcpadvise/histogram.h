// Histogram: a log-linear histogram cheap enough for the hot path: four
// buckets per power of two (exact below 8, within 12.5% above), a bucket index
// from one count-leading-zeros, and a single counter to bump. Count, bounds
// and sum are derived from the buckets when a trace is written, so a record
// touches one cache line.
#ifndef TCPADVISE_HISTOGRAM_H_
#define TCPADVISE_HISTOGRAM_H_

#include <stdint.h>

#include "counter.h"

namespace tcpadvise {

// HistogramBucketOf maps a value to its bucket, for values below 2^(max_msb+1);
// larger values land in the last bucket. The two branches predict well; a
// branch-free form measured slower (a longer dependency chain: 32 against
// 26 ns for a write and a read in bench/hooks_bench.cc).
inline int HistogramBucketOf(uint64_t value, int max_msb) {
  if (value < 4) return static_cast<int>(value);
  int msb = 63 - __builtin_clzll(value);
  if (msb > max_msb) return (max_msb - 1) * 4 + 3;
  return (msb - 1) * 4 + static_cast<int>((value >> (msb - 2)) & 3);
}

// HistogramBucketLow is the smallest value in bucket b.
uint64_t HistogramBucketLow(int bucket);

// HistogramBucketHigh is one past the largest value in bucket b.
uint64_t HistogramBucketHigh(int bucket);

// HistogramSummary is what the buckets say about the recorded values: the
// count exactly, the bounds to a bucket, the sum estimated from midpoints.
struct HistogramSummary {
  uint64_t count = 0;
  uint64_t min = 0;  // low bound of the lowest non-empty bucket
  uint64_t max = 0;  // last value of the highest non-empty bucket
  double estimated_sum = 0;
};

// SummarizeBuckets computes a HistogramSummary over n buckets.
HistogramSummary SummarizeBuckets(const Counter* buckets, int n);

// BucketPercentile estimates the q-quantile (0..1) of n buckets: the middle of
// the bucket that holds it; 0 when empty.
double BucketPercentile(const Counter* buckets, int n, double q);

// Histogram records values up to 2^(kMaxMsb+1); larger ones are clamped into
// the last bucket.
template <int kMaxMsb>
class Histogram {
 public:
  static constexpr int kBuckets = (kMaxMsb - 1) * 4 + 4;

  // Histogram::Record adds one value.
  void Record(uint64_t value) { buckets_[HistogramBucketOf(value, kMaxMsb)].Increment(); }

  // Histogram::MergeFrom adds every value of another histogram of the same size.
  void MergeFrom(const Histogram& other) {
    for (int b = 0; b < kBuckets; ++b) buckets_[b].Add(other.buckets_[b].Get());
  }

  // Histogram::Reset empties the histogram.
  void Reset() {
    for (Counter& b : buckets_) b.Set(0);
  }

  // Histogram::Percentile estimates the q-quantile (see BucketPercentile).
  double Percentile(double q) const { return BucketPercentile(buckets_, kBuckets, q); }

  // Histogram::Summary derives count, bounds and an estimated sum.
  HistogramSummary Summary() const { return SummarizeBuckets(buckets_, kBuckets); }
  uint64_t count() const { return Summary().count; }
  const Counter* buckets() const { return buckets_; }

 private:
  Counter buckets_[kBuckets];
};

// Sizes in bytes below 2 TiB, counts below 32 million, durations in ticks
// below about 2.4 hours at 4 GHz.
using BytesHistogram = Histogram<40>;
using CountHistogram = Histogram<24>;
using TicksHistogram = Histogram<44>;

}  // namespace tcpadvise

#endif  // TCPADVISE_HISTOGRAM_H_
