#include "histogram.h"

namespace tcpadvise {

uint64_t HistogramBucketLow(int bucket) {
  if (bucket < 4) return static_cast<uint64_t>(bucket);
  const int msb = bucket / 4 + 1;
  return static_cast<uint64_t>(4 + bucket % 4) << (msb - 2);
}

uint64_t HistogramBucketHigh(int bucket) {
  if (bucket < 4) return static_cast<uint64_t>(bucket) + 1;
  const int msb = bucket / 4 + 1;
  return static_cast<uint64_t>(4 + bucket % 4 + 1) << (msb - 2);
}

HistogramSummary SummarizeBuckets(const Counter* buckets, int n) {
  HistogramSummary s;
  for (int b = 0; b < n; ++b) {
    const uint64_t c = buckets[b].Get();
    if (c == 0) continue;
    const uint64_t low = HistogramBucketLow(b), high = HistogramBucketHigh(b);
    if (s.count == 0) s.min = low;
    s.max = high - 1;
    s.count += c;
    s.estimated_sum += static_cast<double>(c) * (static_cast<double>(low) + static_cast<double>(high - 1)) / 2;
  }
  return s;
}

double BucketPercentile(const Counter* buckets, int n, double q) {
  const HistogramSummary s = SummarizeBuckets(buckets, n);
  if (s.count == 0) return 0;
  const double rank = q * static_cast<double>(s.count);
  double seen = 0;
  for (int b = 0; b < n; ++b) {
    seen += static_cast<double>(buckets[b].Get());
    if (buckets[b].Get() != 0 && seen >= rank) {
      return (static_cast<double>(HistogramBucketLow(b)) + static_cast<double>(HistogramBucketHigh(b) - 1)) / 2;
    }
  }
  return static_cast<double>(s.max);
}

}  // namespace tcpadvise
