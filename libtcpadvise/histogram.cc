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

}  // namespace tcpadvise
