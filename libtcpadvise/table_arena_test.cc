#include "table_arena.h"

#include <gtest/gtest.h>
#include <string.h>

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

namespace tcpadvise {
namespace {

bool AllZero(const void* p, size_t n) {
  const unsigned char* bytes = static_cast<const unsigned char*>(p);
  return std::all_of(bytes, bytes + n, [](unsigned char b) { return b == 0; });
}

TEST(TableArenaTest, NothingBeforeReserveNorAfterASecondOne) {
  TableArena arena;
  EXPECT_EQ(arena.Alloc(16, 16), nullptr);
  void* slots = arena.Reserve(100, 1 << 20);
  ASSERT_NE(slots, nullptr);
  EXPECT_TRUE(AllZero(slots, 100));
  EXPECT_FALSE(arena.Owns(slots));
  EXPECT_EQ(arena.Reserve(100, 1 << 20), nullptr);
}

TEST(TableArenaTest, BlocksAreZeroedAlignedApartAndOwned) {
  TableArena arena;
  char* slots = static_cast<char*>(arena.Reserve(5000, 1 << 20));
  ASSERT_NE(slots, nullptr);
  char* first = static_cast<char*>(arena.Alloc(100, 8));
  ASSERT_NE(first, nullptr);
  // The objects start a page past the slots' 5,000 bytes rounded up.
  EXPECT_EQ(first, slots + 8192);
  EXPECT_TRUE(arena.Owns(first));
  EXPECT_TRUE(AllZero(first, 100));
  memset(first, 0xff, 100);
  char* second = static_cast<char*>(arena.Alloc(900, 64));
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second, first + 128);  // the next 64 bytes' boundary
  EXPECT_TRUE(AllZero(second, 900));
  // 900 bytes more, three times: 64-byte aligned, one after the other; a
  // fourth would cross the page (at 3,968 + 900): it starts on the next.
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(arena.Alloc(900, 64), second + 960 * i);
  EXPECT_EQ(arena.Alloc(900, 64), first + 4096);
}

TEST(TableArenaTest, LargeBlocksComeFromTheOtherHalf) {
  TableArena arena;
  char* slots = static_cast<char*>(arena.Reserve(4096, 1 << 20));
  ASSERT_NE(slots, nullptr);
  char* small = static_cast<char*>(arena.Alloc(64, 64));
  char* entry = static_cast<char*>(arena.Alloc(1024, 64));
  char* small2 = static_cast<char*>(arena.Alloc(112, 16));
  char* entry2 = static_cast<char*>(arena.Alloc(1024, 64));
  EXPECT_EQ(small, slots + 4096);
  EXPECT_EQ(small2, small + 64);
  EXPECT_EQ(entry, slots + 4096 + (1 << 19));
  EXPECT_EQ(entry2, entry + 1024);  // four to a page, none padded
  char* large = static_cast<char*>(arena.Alloc(10000, 64));
  EXPECT_EQ(large, entry2 + 1024);  // larger than a page: only aligned
  EXPECT_TRUE(arena.Owns(large) && arena.Owns(small2));
}

TEST(TableArenaTest, FullArenaGivesNothing) {
  TableArena arena;
  ASSERT_NE(arena.Reserve(1, 8192), nullptr);
  for (int i = 0; i < 4; ++i) EXPECT_NE(arena.Alloc(1024, 8), nullptr);
  EXPECT_EQ(arena.Alloc(1024, 8), nullptr);
  for (int i = 0; i < 64; ++i) EXPECT_NE(arena.Alloc(64, 8), nullptr);
  EXPECT_EQ(arena.Alloc(1, 1), nullptr);
  EXPECT_EQ(arena.Alloc(SIZE_MAX, 1), nullptr);
}

TEST(TableArenaTest, ThreadsGetBlocksApart) {
  TableArena arena;
  ASSERT_NE(arena.Reserve(1, 4 << 20), nullptr);
  constexpr int kThreads = 4;
  constexpr int kEach = 2000;
  std::vector<std::vector<char*>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&arena, &got, t] {
      for (int i = 0; i < kEach; ++i) got[t].push_back(static_cast<char*>(arena.Alloc(40, 8)));
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<char*> all;
  for (const std::vector<char*>& blocks : got) all.insert(all.end(), blocks.begin(), blocks.end());
  ASSERT_EQ(std::count(all.begin(), all.end(), nullptr), 0);
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); ++i) EXPECT_GE(all[i], all[i - 1] + 40);
}

}  // namespace
}  // namespace tcpadvise
