// Histogram: a log-linear histogram cheap enough for the hot path: four
// buckets per power of two (exact below 8, within 12.5% above), a bucket index
// from one count-leading-zeros, plain relaxed counters.
#ifndef TCPADVISE_HISTOGRAM_H_
#define TCPADVISE_HISTOGRAM_H_

#include <stdint.h>

#include "counter.h"

namespace tcpadvise {

// HistogramBucketOf maps a value to its bucket, for values below 2^(max_msb+1);
// larger values land in the last bucket.
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

// HistogramData is the state behind every Histogram size: the part the trace
// writer and the merge code read, whatever the bucket count.
struct HistogramData {
  Counter count;
  Counter sum;
  Counter min;  // UINT64_MAX while empty, set by Reset
  Counter max;
};

// Histogram records values up to 2^(kMaxMsb+1); larger ones are clamped into
// the last bucket, and max keeps the true value.
template <int kMaxMsb>
class Histogram {
 public:
  static constexpr int kMaxMsbValue = kMaxMsb;
  static constexpr int kBuckets = (kMaxMsb - 1) * 4 + 4;

  Histogram() { Reset(); }

  // Histogram::Record adds one value.
  void Record(uint64_t value) {
    buckets_[HistogramBucketOf(value, kMaxMsb)].Increment();
    data_.count.Increment();
    data_.sum.Add(value);
    if (value < data_.min.Get()) data_.min.Set(value);
    if (value > data_.max.Get()) data_.max.Set(value);
  }

  // Histogram::MergeFrom adds every value of another histogram of the same size.
  void MergeFrom(const Histogram& other) {
    if (other.data_.count.Get() == 0) return;
    for (int b = 0; b < kBuckets; ++b) buckets_[b].Add(other.buckets_[b].Get());
    data_.count.Add(other.data_.count.Get());
    data_.sum.Add(other.data_.sum.Get());
    if (other.data_.min.Get() < data_.min.Get()) data_.min.Set(other.data_.min.Get());
    if (other.data_.max.Get() > data_.max.Get()) data_.max.Set(other.data_.max.Get());
  }

  // Histogram::Reset empties the histogram.
  void Reset() {
    for (Counter& b : buckets_) b.Set(0);
    data_.count.Set(0);
    data_.sum.Set(0);
    data_.min.Set(UINT64_MAX);
    data_.max.Set(0);
  }

  const HistogramData& data() const { return data_; }
  const Counter* buckets() const { return buckets_; }
  uint64_t count() const { return data_.count.Get(); }

 private:
  Counter buckets_[kBuckets];
  HistogramData data_;
};

// Sizes in bytes up to 1 TiB, counts up to 16 million, durations in ticks up
// to about an hour at 4 GHz.
using BytesHistogram = Histogram<40>;
using CountHistogram = Histogram<24>;
using TicksHistogram = Histogram<44>;

}  // namespace tcpadvise

#endif  // TCPADVISE_HISTOGRAM_H_
