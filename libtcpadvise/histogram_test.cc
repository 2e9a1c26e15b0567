#include "histogram.h"

#include <gtest/gtest.h>

namespace tcpadvise {
namespace {

TEST(HistogramTest, ExactBelowEight) {
  for (uint64_t v = 0; v < 8; ++v) {
    const int b = HistogramBucketOf(v, 40);
    EXPECT_EQ(HistogramBucketLow(b), v);
    EXPECT_EQ(HistogramBucketHigh(b), v + 1);
  }
}

TEST(HistogramTest, EveryValueFallsInsideItsBucket) {
  for (uint64_t v = 1; v < (uint64_t{1} << 40); v = v * 3 / 2 + 1) {
    const int b = HistogramBucketOf(v, 40);
    EXPECT_LE(HistogramBucketLow(b), v) << v;
    EXPECT_LT(v, HistogramBucketHigh(b)) << v;
    // Four buckets per power of two: a bucket is at most a quarter of its low bound wide.
    EXPECT_LE(HistogramBucketHigh(b) - HistogramBucketLow(b), HistogramBucketLow(b) / 4 + 1) << v;
  }
}

TEST(HistogramTest, BucketsAreContiguousAndIncreasing) {
  for (int b = 0; b + 1 < BytesHistogram::kBuckets; ++b) {
    EXPECT_EQ(HistogramBucketHigh(b), HistogramBucketLow(b + 1)) << b;
  }
}

TEST(HistogramTest, LargeValuesClampIntoLastBucketAndKeepMax) {
  CountHistogram h;
  const uint64_t huge = uint64_t{1} << 50;
  h.Record(huge);
  EXPECT_EQ(h.buckets()[CountHistogram::kBuckets - 1].Get(), 1u);
  EXPECT_EQ(h.data().max.Get(), huge);
}

TEST(HistogramTest, RecordTracksCountSumMinMax) {
  BytesHistogram h;
  EXPECT_EQ(h.data().min.Get(), UINT64_MAX);
  for (uint64_t v : {5u, 100u, 2u, 1000u}) h.Record(v);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.data().sum.Get(), 1107u);
  EXPECT_EQ(h.data().min.Get(), 2u);
  EXPECT_EQ(h.data().max.Get(), 1000u);
  EXPECT_EQ(h.buckets()[HistogramBucketOf(100, 40)].Get(), 1u);
}

TEST(HistogramTest, MergeAddsBucketsAndExtremes) {
  BytesHistogram a, b;
  a.Record(10);
  b.Record(3);
  b.Record(7000);
  a.MergeFrom(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_EQ(a.data().min.Get(), 3u);
  EXPECT_EQ(a.data().max.Get(), 7000u);
  EXPECT_EQ(a.data().sum.Get(), 7013u);
  a.Reset();
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(a.data().min.Get(), UINT64_MAX);
}

}  // namespace
}  // namespace tcpadvise
