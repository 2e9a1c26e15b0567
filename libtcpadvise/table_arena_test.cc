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

uintptr_t PageOf(const void* p) { return reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095}; }

TEST(TableArenaTest, BlocksAreZeroedAlignedApartAndOwned) {
  TableArena arena;
  char* slots = static_cast<char*>(arena.Reserve(5000, 1 << 20));
  ASSERT_NE(slots, nullptr);
  char* first = static_cast<char*>(arena.Alloc(100, 8));
  ASSERT_NE(first, nullptr);
  // The small blocks start on a page of their own, half the objects' room past the slots.
  EXPECT_EQ(PageOf(first), reinterpret_cast<uintptr_t>(first));
  EXPECT_EQ(PageOf(first), PageOf(slots + 5000 + (1 << 19)));
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

TEST(TableArenaTest, TheFirstEntriesShareTheSlotsLastPage) {
  TableArena arena;
  char* slots = static_cast<char*>(arena.Reserve(4096, 1 << 20));
  ASSERT_NE(slots, nullptr);
  char* slots_end = slots + 4096;
  // The slots end kSlotsTail bytes into a page; the first entries fill the rest of it.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slots_end) - PageOf(slots_end), TableArena::kSlotsTail);
  char* entry = static_cast<char*>(arena.Alloc(1024, 64));
  char* small = static_cast<char*>(arena.Alloc(64, 64));
  char* entry2 = static_cast<char*>(arena.Alloc(1024, 64));
  char* small2 = static_cast<char*>(arena.Alloc(112, 16));
  char* entry3 = static_cast<char*>(arena.Alloc(1024, 64));
  EXPECT_EQ(entry, slots_end);
  EXPECT_EQ(entry2, entry + 1024);  // none padded
  EXPECT_EQ(entry3, entry2 + 1024);
  EXPECT_EQ(PageOf(entry3), PageOf(slots_end - 1));
  EXPECT_EQ(small, reinterpret_cast<char*>(PageOf(slots_end + (1 << 19))));
  EXPECT_EQ(small2, small + 64);
  char* entry4 = static_cast<char*>(arena.Alloc(1024, 64));
  EXPECT_EQ(entry4, entry3 + 1024);  // the next page's first
  char* large = static_cast<char*>(arena.Alloc(10000, 64));
  EXPECT_EQ(large, entry4 + 1024);  // larger than a page: only aligned
  EXPECT_TRUE(arena.Owns(large) && arena.Owns(small2) && arena.Owns(entry));
  EXPECT_FALSE(arena.Owns(slots_end - 1));
}

TEST(TableArenaTest, FewerSlotsThanTheirTailStillEndThere) {
  TableArena arena;
  char* slots = static_cast<char*>(arena.Reserve(100, 1 << 20));
  ASSERT_NE(slots, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slots + 100) - PageOf(slots), TableArena::kSlotsTail);
  EXPECT_EQ(arena.Alloc(1024, 64), slots + 100);
}

TEST(TableArenaTest, FullArenaGivesNothing) {
  TableArena arena;
  ASSERT_NE(arena.Reserve(1, 8192), nullptr);
  // The large blocks' half: the 3 KiB after the slots; the small ones': the 5 KiB from the next page.
  for (int i = 0; i < 3; ++i) EXPECT_NE(arena.Alloc(1024, 8), nullptr);
  EXPECT_EQ(arena.Alloc(1024, 8), nullptr);
  for (int i = 0; i < 80; ++i) EXPECT_NE(arena.Alloc(64, 8), nullptr);
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
