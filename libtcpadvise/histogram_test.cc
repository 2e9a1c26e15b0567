#include "histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "json_writer.h"
#include "private_alloc.h"

namespace tcpadvise {
namespace {

TEST(HistogramTest, ExactBelow256) {
  for (uint64_t v = 0; v < 256; ++v) {
    const int b = HistogramBucketOf(v);
    EXPECT_EQ(HistogramBucketLow(b), v);
    EXPECT_EQ(HistogramBucketHigh(b), v + 1);
  }
}

TEST(HistogramTest, EveryValueFallsInsideABucketLessThanOnePercentWide) {
  for (uint64_t v = 1; v < (uint64_t{1} << 62); v += v / 4 + 1) {
    for (uint64_t x : {v, v + 1, v * 2 - 1}) {
      const int b = HistogramBucketOf(x);
      ASSERT_LT(b, kHistogramBuckets);
      EXPECT_LE(HistogramBucketLow(b), x) << x;
      EXPECT_LT(x, HistogramBucketHigh(b)) << x;
      EXPECT_LE(static_cast<double>(HistogramBucketHigh(b) - HistogramBucketLow(b)),
                static_cast<double>(HistogramBucketLow(b)) / 128 + 1) << x;
    }
  }
  EXPECT_EQ(HistogramBucketOf(~uint64_t{0}), kHistogramBuckets - 1);
  EXPECT_EQ(HistogramBucketHigh(kHistogramBuckets - 1), ~uint64_t{0});
}

TEST(HistogramTest, BucketsAreContiguousAndMapBack) {
  for (int b = 0; b + 1 < kHistogramBuckets; ++b) {
    ASSERT_EQ(HistogramBucketHigh(b), HistogramBucketLow(b + 1)) << b;
    ASSERT_EQ(HistogramBucketOf(HistogramBucketLow(b)), b);
    ASSERT_EQ(HistogramBucketOf(HistogramBucketHigh(b) - 1), b);
  }
}

// Exact is the q-quantile the way Histogram::Percentile ranks: the smallest
// value with at least q * n values at or below it.
uint64_t Exact(std::vector<uint64_t> values, double q) {
  std::sort(values.begin(), values.end());
  const double rank = q * static_cast<double>(values.size());
  size_t i = 0;
  while (i + 1 < values.size() && static_cast<double>(i + 1) < rank) ++i;
  return values[i];
}

TEST(HistogramTest, PercentilesWithinOnePercentOfRandomValues) {
  std::mt19937_64 random(13);
  for (int round = 0; round < 40; ++round) {
    // Log-uniform over a random span: a mix of exact and wide buckets.
    const int top_bits = 1 + static_cast<int>(random() % 63);
    std::vector<uint64_t> values(1 + random() % 3000);
    Histogram h;
    for (uint64_t& v : values) {
      v = random() >> (64 - top_bits);
      v >>= random() % top_bits;
      h.Record(v);
    }
    for (double q : {0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0}) {
      const uint64_t exact = Exact(values, q);
      const uint64_t got = h.Percentile(q);
      const double error = static_cast<double>(got > exact ? got - exact : exact - got);
      ASSERT_LE(error, static_cast<double>(exact) / 128) << "q " << q << " round " << round;
      if (exact < 256) {
        ASSERT_EQ(got, exact);
      }
    }
  }
}

TEST(HistogramTest, SmallAndRoundValuesAreExact) {
  Histogram small, page, big;
  for (int i = 0; i < 100; ++i) small.Record(128);
  for (int i = 0; i < 100; ++i) page.Record(65536);
  for (int i = 0; i < 99; ++i) big.Record(1000);
  big.Record(5000);
  EXPECT_EQ(small.Percentile(0.5), 128u);
  EXPECT_EQ(page.Percentile(0.5), 65536u);
  EXPECT_EQ(page.Percentile(0.99), 65536u);
  EXPECT_EQ(big.Percentile(0.5), 1000u);  // 1000 is its bucket's low edge
  EXPECT_EQ(big.Percentile(0.995), 5000u);  // max's bucket reads as max
}

TEST(HistogramTest, CountMinMaxAndSumAreExact) {
  Histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Percentile(0.5), 0u);
  const HistogramSummary empty = h.Summary();
  EXPECT_EQ(empty.min, 0u);
  EXPECT_EQ(empty.max, 0u);
  uint64_t sum = 0;
  for (uint64_t v : {1001u, 100003u, 7u, 999999937u, 0u, 4097u}) {
    h.Record(v);
    sum += v;
  }
  const HistogramSummary s = h.Summary();
  EXPECT_EQ(s.count, 6u);
  EXPECT_EQ(s.min, 0u);
  EXPECT_EQ(s.max, 999999937u);
  EXPECT_EQ(s.sum, sum);
  Histogram top;
  top.Record(~uint64_t{0});
  EXPECT_EQ(top.Summary().min, ~uint64_t{0});
  EXPECT_EQ(top.Percentile(0.5), ~uint64_t{0});
}

TEST(HistogramTest, FewDistinctValuesStayInline) {
  Histogram h;
  for (int i = 0; i < 1000; ++i) h.Record(static_cast<uint64_t>(i % Histogram::kInlineBuckets) * 1000);
  EXPECT_EQ(h.HeapBytes(), 0u);
  h.Record(123456);
  EXPECT_GT(h.HeapBytes(), 0u);
  EXPECT_EQ(h.count(), 1001u);
}

TEST(HistogramTest, SpilledBucketsKeepEveryCountInOrder) {
  Histogram h;
  std::vector<uint64_t> values;
  for (uint64_t v = 3; v < 1000000; v = v * 3 + 1) {
    for (int i = 0; i < 3; ++i) {
      h.Record(v);
      values.push_back(v);
    }
  }
  int last = -1;
  uint64_t total = 0;
  h.ForEachBucket([&](int b, uint64_t n) {
    EXPECT_GT(b, last);
    EXPECT_EQ(n, 3u);
    last = b;
    total += n;
  });
  EXPECT_EQ(total, values.size());
  for (double q : {0.1, 0.5, 0.9}) {
    EXPECT_LE(h.Percentile(q), Exact(values, q));  // low edges: no bucket here holds max
    EXPECT_GE(static_cast<double>(h.Percentile(q)), static_cast<double>(Exact(values, q)) * (1 - 1.0 / 128));
  }
}

TEST(HistogramTest, MergeEqualsRecordingEverything) {
  std::mt19937_64 random(7);
  Histogram a, b, both;
  for (int i = 0; i < 2000; ++i) {
    const uint64_t v = random() >> (random() % 64);
    (i % 3 ? a : b).Record(v);
    both.Record(v);
  }
  a.MergeFrom(b);
  const HistogramSummary sa = a.Summary(), sb = both.Summary();
  EXPECT_EQ(sa.count, sb.count);
  EXPECT_EQ(sa.min, sb.min);
  EXPECT_EQ(sa.max, sb.max);
  EXPECT_EQ(sa.sum, sb.sum);
  for (double q : {0.0, 0.5, 0.99, 1.0}) EXPECT_EQ(a.Percentile(q), both.Percentile(q));
  Histogram empty;
  a.MergeFrom(empty);
  EXPECT_EQ(a.Summary().min, sb.min);
}

TEST(HistogramTest, ResetEmptiesAndKeepsItsChunks) {
  Histogram h;
  for (uint64_t v = 1; v < 100000; v *= 2) h.Record(v);
  const uint64_t heap = h.HeapBytes();
  EXPECT_GT(heap, 0u);
  h.Reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Summary().max, 0u);
  EXPECT_EQ(h.HeapBytes(), heap);
  h.Record(42);
  EXPECT_EQ(h.Summary().min, 42u);
  EXPECT_EQ(h.Percentile(0.5), 42u);
}

TEST(HistogramTest, NoRoomFailsOpenIntoUnbucketed) {
  Histogram h;
  for (uint64_t v = 0; v < Histogram::kInlineBuckets; ++v) h.Record(v);
  t_in_private_heap = true;  // as a signal handler that interrupted the private heap sees it
  h.Record(1000);
  h.Record(2000);
  t_in_private_heap = false;
  EXPECT_EQ(h.unbucketed(), 2u);
  EXPECT_EQ(h.HeapBytes(), 0u);
  const HistogramSummary s = h.Summary();
  EXPECT_EQ(s.count, Histogram::kInlineBuckets + 2u);
  EXPECT_EQ(s.max, 2000u);
  EXPECT_EQ(h.Percentile(1.0), 2000u);
}

TEST(HistogramTest, ConcurrentReaderSeesConsistentGrowth) {
  Histogram h;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::mt19937_64 random(3);
    for (int i = 0; i < 200000; ++i) h.Record(random() >> (random() % 64));
    done.store(true);
  });
  uint64_t last_count = 0;
  int reads = 0;
  while (!done.load() || reads == 0) {
    const HistogramSummary s = h.Summary();
    EXPECT_GE(s.count, last_count);
    EXPECT_LE(s.count, 200000u);
    last_count = s.count;
    uint64_t buckets = 0;
    int last = -1;
    h.ForEachBucket([&](int b, uint64_t n) {
      EXPECT_GT(b, last);
      last = b;
      buckets += n;
    });
    EXPECT_LE(buckets, 200000u);
    ++reads;
  }
  writer.join();
  EXPECT_EQ(h.count(), 200000u);
}

TEST(HistogramTest, EmitsExactFiguresAndIndexedBuckets) {
  Histogram h;
  h.Record(3);
  h.Record(1000);
  h.Record(1000);
  JsonWriter w;
  w.BeginObject();
  EmitHistogram(&w, "size", "bytes", h, 1.0, 2);
  w.EndObject();
  ASSERT_FALSE(w.failed());
  const std::string json(w.data(), w.size());
  const std::string b1000 = std::to_string(HistogramBucketOf(1000));
  EXPECT_EQ(json, "{\"size\":{\"unit\":\"bytes\",\"count\":5,\"sum\":2005,\"min\":1,\"max\":1000,"
                  "\"sub_buckets\":128,\"scale\":1,\"buckets\":[[1,2],[3,1],[" + b1000 + ",2]]}}");
}

}  // namespace
}  // namespace tcpadvise
