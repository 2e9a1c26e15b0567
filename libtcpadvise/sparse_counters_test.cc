#include "sparse_counters.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "histogram.h"
#include "private_alloc.h"
#include "private_alloc_testing.h"

namespace tcpadvise {
namespace {

using Buckets = SparseCounters<4, kHistogramBuckets>;

std::map<int, uint64_t> Contents(const Buckets& c) {
  std::map<int, uint64_t> out;
  int last = -1;
  c.ForEach([&](int key, uint64_t n) {
    EXPECT_GT(key, last);
    last = key;
    out[key] = n;
  });
  return out;
}

// Spread returns n distinct keys as a histogram meets them: runs of
// neighbouring buckets over a few powers of two.
std::vector<int> Spread(int n) {
  std::vector<int> keys;
  for (int i = 0; i < n; ++i) keys.push_back(1000 + (i % 3) * 128 + i / 3);
  return keys;
}

TEST(SparseCountersTest, TablesGrowALevelAtATimeBeforeAnyChunk) {
  Buckets c;
  std::map<int, uint64_t> expected;
  int levels = 0;
  uint64_t heap = 0;
  const std::vector<int> keys = Spread(200);
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t j = 0; j <= i % 3; ++j) {
      c.Add(keys[i], 1);
      ++expected[keys[i]];
    }
    ASSERT_GE(c.TableLevels(), levels);  // levels are only ever added
    ASSERT_GE(c.HeapBytes(), heap);
    levels = c.TableLevels();
    heap = c.HeapBytes();
    if (i < 4) {
      ASSERT_EQ(heap, 0u) << i;  // four keys stay inline
    }
    if (i >= 4 && i < 12) {
      ASSERT_EQ(levels, 1) << "8 slots hold a first few keys beyond the inline ones";
      ASSERT_LE(heap, 64u);
    }
  }
  EXPECT_EQ(levels, Buckets::kTableLevels);
  EXPECT_FALSE(c.HasChunks()) << "200 keys fit the tables";
  EXPECT_LT(heap, 1600u);
  EXPECT_EQ(Contents(c), expected);
  EXPECT_EQ(c.lost(), 0u);
  for (const auto& [key, n] : expected) ASSERT_EQ(c.Get(key), n);
}

TEST(SparseCountersTest, KeysBeyondTheTablesGoToChunks) {
  Buckets c;
  std::map<int, uint64_t> expected;
  for (int key = 0; key < kHistogramBuckets; ++key) {
    c.Add(key, static_cast<uint64_t>(key % 5 + 1));
    expected[key] = static_cast<uint64_t>(key % 5 + 1);
  }
  EXPECT_TRUE(c.HasChunks());
  EXPECT_EQ(c.TableLevels(), Buckets::kTableLevels);
  EXPECT_EQ(Contents(c), expected);
  uint64_t total = 0;
  for (const auto& [key, n] : expected) total += n;
  EXPECT_EQ(c.Total(), total);
  // A pathological histogram, every bucket: the tables, the chunk table and every chunk.
  EXPECT_LT(c.HeapBytes(), 62u * 1024);
  // Adding again finds every key where it lives.
  for (int key = 0; key < kHistogramBuckets; ++key) c.Add(key, 1);
  EXPECT_EQ(c.Total(), total + kHistogramBuckets);
  EXPECT_EQ(c.Get(5000), expected[5000] + 1);
}

TEST(SparseCountersTest, TableCountNearOverflowIsPromotedToItsChunkAndStaysExact) {
  Buckets c;
  for (int key = 0; key < 4; ++key) c.Add(key, 1);  // fill the inline pairs
  const int key = 3000;
  c.Add(key, UINT32_MAX - 1);
  EXPECT_FALSE(c.HasChunks());
  c.Add(key, 1);  // exactly UINT32_MAX: still the table's
  EXPECT_FALSE(c.HasChunks());
  c.Add(key, 1);  // would overflow 32 bits: promoted
  EXPECT_TRUE(c.HasChunks());
  for (int i = 0; i < 10; ++i) c.Add(key, 1);
  c.Add(key, uint64_t{1} << 40);
  const uint64_t want = uint64_t{UINT32_MAX} + 11 + (uint64_t{1} << 40);
  EXPECT_EQ(c.Get(key), want);
  EXPECT_EQ(Contents(c)[key], want);
  EXPECT_EQ(c.Total(), want + 4);
  EXPECT_EQ(c.lost(), 0u);
  // Merging a promoted key carries both parts.
  Buckets merged;
  merged.MergeFrom(c);
  EXPECT_EQ(merged.Get(key), want);
  EXPECT_EQ(merged.Total(), want + 4);
}

// Once a key's chunk exists, its counts go there (chunk first): a key with
// an older table count is split between its slot and its chunk, readers sum
// both, and new keys of that chunk take no table slot.
TEST(SparseCountersTest, KeysOfAnExistingChunkAreCountedThere) {
  Buckets c;
  for (int key = 0; key < 4; ++key) c.Add(key, 1);  // fill the inline pairs
  c.Add(3000, 1);                                   // a table slot
  EXPECT_EQ(c.TableLevels(), 1);
  c.Add(3001, uint64_t{1} << 40);  // too large for a table count: allocates chunk 3000 >> 7
  EXPECT_TRUE(c.HasChunks());
  const uint64_t heap = c.HeapBytes();
  c.Add(3000, 1);  // its chunk now
  for (int key = 2944; key < 3072; ++key) c.Add(key, 1);
  // So the tables keep their room for other keys: 150 more fit, no chunk added.
  for (int key = 5000; key < 5150; ++key) c.Add(key, 1);
  EXPECT_EQ(c.HeapBytes(), heap) << "the chunk's keys took table slots";
  EXPECT_EQ(c.Get(3000), 3u);
  EXPECT_EQ(c.Get(3001), (uint64_t{1} << 40) + 1);
  std::map<int, uint64_t> contents;
  c.ForEach([&](int key, uint64_t n) { contents[key] = n; });
  EXPECT_EQ(contents.size(), 4u + 128u + 150u);
  EXPECT_EQ(contents[3000], 3u);
  EXPECT_EQ(c.Total(), 4 + 3 + (uint64_t{1} << 40) + 1 + 126 + 150);
  Buckets merged;
  merged.MergeFrom(c);
  EXPECT_EQ(merged.Get(3000), 3u);
  EXPECT_EQ(merged.Total(), c.Total());
}

// A merge adds every tier of the other's (inline, tables, chunks, a chunk
// this side has too counter by counter) whatever either side holds.
TEST(SparseCountersTest, MergesAddEveryTierExactly) {
  std::mt19937_64 rng(5);
  std::map<int, uint64_t> expected;
  Buckets group;
  for (int socket = 0; socket < 6; ++socket) {
    Buckets c;
    // Sockets of few keys, of tens, and of hundreds spread over many chunks.
    const int keys = socket % 3 == 0 ? 3 : socket % 3 == 1 ? 60 : 900;
    for (int i = 0; i < 4000; ++i) {
      const int key = static_cast<int>(rng() % static_cast<uint64_t>(keys)) * 7 + socket;
      const uint64_t n = 1 + rng() % 3;
      c.Add(key, n);
      expected[key] += n;
    }
    group.MergeFrom(c);
    ASSERT_EQ(Contents(group), expected) << socket;
  }
  uint64_t total = 0;
  for (const auto& [key, n] : expected) total += n;
  EXPECT_EQ(group.Total(), total);
}

// An inline pair's count is 48 bits: one about to pass them goes on in a
// table slot of the same key (then its chunk), and every reader sums both.
TEST(SparseCountersTest, InlineCountNearOverflowIsPromotedAndStaysExact) {
  using Pairs = SparseCounters<Histogram::kInlineBuckets, kHistogramBuckets>;
  Pairs c;
  const uint64_t top = (uint64_t{1} << Pairs::kPairCountBits) - 1;
  c.Add(7, top - 1);
  c.Add(8, 1);
  EXPECT_EQ(c.HeapBytes(), 0u);
  c.Add(7, 1);  // exactly 2^48 - 1: still inline
  EXPECT_EQ(c.HeapBytes(), 0u);
  c.Add(7, 1);  // would pass 48 bits: a table slot
  EXPECT_EQ(c.TableLevels(), 1);
  for (int i = 0; i < 10; ++i) c.Add(7, 1);
  c.Add(7, uint64_t{1} << 50);  // beyond a table count too: its chunk
  EXPECT_TRUE(c.HasChunks());
  c.Add(9, uint64_t{1} << 50);  // a count too large for any pair or slot: straight to its chunk
  const uint64_t want = top + 11 + (uint64_t{1} << 50);
  EXPECT_EQ(c.Get(7), want);
  EXPECT_EQ(c.Get(8), 1u);
  EXPECT_EQ(c.Get(9), uint64_t{1} << 50);
  std::map<int, uint64_t> contents;
  c.ForEach([&](int key, uint64_t n) { contents[key] = n; });
  EXPECT_EQ(contents, (std::map<int, uint64_t>{{7, want}, {8, 1}, {9, uint64_t{1} << 50}}));
  EXPECT_EQ(c.Total(), want + 1 + (uint64_t{1} << 50));
  EXPECT_EQ(c.lost(), 0u);
  // The third inline pair is still free for a small count.
  c.Add(10, 3);
  EXPECT_EQ(c.Get(10), 3u);
  Pairs merged;
  merged.MergeFrom(c);
  EXPECT_EQ(merged.Get(7), want);
  EXPECT_EQ(merged.Total(), c.Total());
}

TEST(SparseCountersTest, ResetKeepsTheTiersAndReusesThem) {
  Buckets c;
  for (int key = 0; key < 600; ++key) c.Add(key * 7, 1);
  const uint64_t heap = c.HeapBytes();
  const int levels = c.TableLevels();
  c.Reset();
  EXPECT_EQ(c.Total(), 0u);
  EXPECT_TRUE(Contents(c).empty());
  EXPECT_EQ(c.HeapBytes(), heap);
  for (int key = 0; key < 50; ++key) c.Add(key, 2);
  EXPECT_EQ(c.HeapBytes(), heap);
  EXPECT_EQ(c.TableLevels(), levels);
  EXPECT_EQ(c.Total(), 100u);
  EXPECT_EQ(c.Get(49), 2u);
}

TEST(SparseCountersTest, AllocationFailureFailsOpenIntoLostAndRecovers) {
  Buckets c;
  for (int key = 0; key < 4; ++key) c.Add(key, 1);
  PrivateAllocFailAfter(0);
  c.Add(100, 1);
  c.Add(200, 5);
  PrivateAllocFailAfter(-1);
  EXPECT_EQ(c.lost(), 6u);
  EXPECT_EQ(c.HeapBytes(), 0u);
  EXPECT_EQ(c.Total(), 10u);
  EXPECT_EQ(c.Get(100), 0u);
  // The first level was allocated; the second fails: its keys are lost, the
  // first level's still count.
  const std::vector<int> keys = Spread(60);
  PrivateAllocFailAfter(1);
  for (int key : keys) c.Add(key, 1);
  PrivateAllocFailAfter(-1);
  EXPECT_EQ(c.TableLevels(), 1);
  EXPECT_GT(c.lost(), 6u);
  EXPECT_EQ(c.Total(), 10u + keys.size());
  // Memory back: new keys get a place again.
  c.Add(7000, 3);
  EXPECT_EQ(c.Get(7000), 3u);
  EXPECT_EQ(c.Total(), 13u + keys.size());
  // A signal handler that interrupted the private heap may not allocate.
  Buckets d;
  for (int key = 0; key < 4; ++key) d.Add(key, 1);
  t_in_private_heap = true;
  d.Add(500, 1);
  t_in_private_heap = false;
  EXPECT_EQ(d.lost(), 1u);
  EXPECT_EQ(d.HeapBytes(), 0u);
}

TEST(SparseCountersTest, ConcurrentReaderSeesEveryTierGrow) {
  Buckets c;
  constexpr int kAdds = 300000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::mt19937 random(5);
    for (int i = 0; i < kAdds; ++i) {
      // Mostly a few hot keys, a growing tail that reaches the chunks.
      const int key = i % 4 == 0 ? static_cast<int>(random() % kHistogramBuckets) : 2000 + static_cast<int>(random() % 16);
      c.Add(key, 1);
    }
    done.store(true);
  });
  uint64_t last_total = 0;
  int reads = 0;
  while (!done.load() || reads == 0) {
    const uint64_t total = c.Total();
    EXPECT_GE(total, last_total);
    EXPECT_LE(total, static_cast<uint64_t>(kAdds));
    last_total = total;
    uint64_t sum = 0;
    int last = -1;
    c.ForEach([&](int key, uint64_t n) {
      EXPECT_GT(key, last);
      last = key;
      sum += n;
    });
    EXPECT_LE(sum, static_cast<uint64_t>(kAdds));
    (void)c.Get(2001);
    (void)c.HeapBytes();
    ++reads;
  }
  writer.join();
  EXPECT_EQ(c.Total(), static_cast<uint64_t>(kAdds));
  EXPECT_EQ(c.lost(), 0u);
  EXPECT_TRUE(c.HasChunks());
}

TEST(SparseCountersTest, RacingWritersLoseNoKeyAndNeverDuplicateOne) {
  // Two threads adding the same new keys at once: each key ends in one
  // place (Counter semantics may lose a racing increment, never a key).
  Buckets c;
  std::thread a([&] {
    for (int key = 0; key < 400; ++key) c.Add(key * 11, 1);
  });
  std::thread b([&] {
    for (int key = 0; key < 400; ++key) c.Add(key * 11, 1);
  });
  a.join();
  b.join();
  const std::map<int, uint64_t> contents = Contents(c);
  EXPECT_EQ(contents.size(), 400u);
  for (const auto& [key, n] : contents) {
    EXPECT_GE(n, 1u);
    EXPECT_LE(n, 2u);
  }
}

}  // namespace
}  // namespace tcpadvise
