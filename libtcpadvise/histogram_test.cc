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

TEST(HistogramTest, EachBucketsBoundsMapBackToIt) {
  for (int b = 0; b < TicksHistogram::kBuckets; ++b) {
    EXPECT_EQ(HistogramBucketOf(HistogramBucketLow(b), 44), b);
    EXPECT_EQ(HistogramBucketOf(HistogramBucketHigh(b) - 1, 44), b);
  }
}

TEST(HistogramTest, LargeValuesClampIntoLastBucket) {
  CountHistogram h;
  h.Record(uint64_t{1} << 50);
  EXPECT_EQ(h.buckets()[CountHistogram::kBuckets - 1].Get(), 1u);
  EXPECT_EQ(h.count(), 1u);
}

TEST(HistogramTest, SummaryGivesExactCountAndBucketBounds) {
  BytesHistogram h;
  EXPECT_EQ(h.count(), 0u);
  for (uint64_t v : {5u, 100u, 2u, 1000u}) h.Record(v);
  const HistogramSummary s = h.Summary();
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.min, 2u);  // exact below 8
  EXPECT_LE(s.max, 1000u * 9 / 8);
  EXPECT_GE(s.max, 1000u);
  EXPECT_NEAR(s.estimated_sum, 1107, 1107 * 0.125);
}

TEST(HistogramTest, MergeAddsBucketsAndResetEmpties) {
  BytesHistogram a, b;
  a.Record(10);
  b.Record(3);
  b.Record(7000);
  a.MergeFrom(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_EQ(a.Summary().min, 3u);
  EXPECT_GE(a.Summary().max, 7000u);
  a.Reset();
  EXPECT_EQ(a.count(), 0u);
}

TEST(HistogramTest, PercentileIsTheMiddleOfTheBucketHoldingIt) {
  BytesHistogram h;
  EXPECT_EQ(h.Percentile(0.5), 0);
  for (int i = 0; i < 90; ++i) h.Record(3);
  for (int i = 0; i < 10; ++i) h.Record(1000);
  EXPECT_EQ(h.Percentile(0.5), 3);
  EXPECT_EQ(h.Percentile(0.9), 3);
  const double p99 = h.Percentile(0.99);
  EXPECT_GT(p99, 1000 * 0.85);
  EXPECT_LT(p99, 1000 * 1.15);
}

}  // namespace
}  // namespace tcpadvise
