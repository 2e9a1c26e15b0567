#include "trace_spool.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

namespace tcpadvise {
namespace {

struct Record {
  int pid;
  std::string json;
};

// Records walks the committed records as a reader does: where the claims
// reached, over the zeros before a record moved to the next page.
std::vector<Record> Records(const SpoolHeader* spool) {
  std::vector<Record> records;
  const char* base = reinterpret_cast<const char*>(spool);
  const uint64_t end = spool->offset.load() < spool->capacity ? spool->offset.load() : spool->capacity;
  for (uint64_t at = kSpoolHeaderBytes; at + sizeof(SpoolRecordHeader) <= end;) {
    const auto* r = reinterpret_cast<const SpoolRecordHeader*>(base + at);
    if (r->magic == 0) {
      at += 8;
      continue;
    }
    if (r->magic != kSpoolRecordMagic) break;
    if (r->state.load() == kSpoolCommitted) {
      records.push_back({r->pid, std::string(reinterpret_cast<const char*>(r) + sizeof(*r), r->length)});
    }
    at += (sizeof(SpoolRecordHeader) + r->length + 7) & ~uint64_t{7};
  }
  return records;
}

class TraceSpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/spool_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/prog.1.0123456789abcdef.spool";
  }
  void TearDown() override {
    for (SpoolHeader* spool : mapped_) UnmapSpool(spool);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  SpoolHeader* Map(uint64_t capacity) {
    SpoolHeader* spool = MapSpool(path_.c_str(), capacity, getpid(), 42, &dev_, &ino_);
    if (spool != nullptr) mapped_.push_back(spool);
    return spool;
  }
  std::string dir_, path_;
  uint64_t dev_ = 0, ino_ = 0;
  std::vector<SpoolHeader*> mapped_;
};

TEST_F(TraceSpoolTest, CreatesAPrivateSparseFileWithItsHeader) {
  SpoolHeader* spool = Map(kSpoolCapacity);
  ASSERT_NE(spool, nullptr);
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), kSpoolCapacity);
  EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512, kSpoolFirstReserve + 65536);  // only the reserve has blocks
  EXPECT_EQ(memcmp(spool->magic, "TCPASPOL", 8), 0);
  EXPECT_EQ(spool->version, 2u);
  EXPECT_EQ(spool->header_bytes, kSpoolHeaderBytes);
  EXPECT_EQ(spool->offset.load(), kSpoolHeaderBytes);
  EXPECT_EQ(spool->allocated.load(), kSpoolFirstReserve);
  EXPECT_EQ(spool->owner_pid, getpid());
  EXPECT_FALSE(SpoolHalfFull(spool));
  // Never over a file that is there, nor through a symlink.
  uint64_t dev, ino;
  EXPECT_EQ(MapSpool(path_.c_str(), kSpoolCapacity, 1, 1, &dev, &ino), nullptr);
  EXPECT_EQ(errno, EEXIST);
  const std::string link = dir_ + "/link.spool";
  ASSERT_EQ(symlink("/tmp/spool_test_victim", link.c_str()), 0);
  EXPECT_EQ(MapSpool(link.c_str(), kSpoolCapacity, 1, 1, &dev, &ino), nullptr);
  EXPECT_EQ(access("/tmp/spool_test_victim", F_OK), -1);
  unlink(link.c_str());
}

TEST_F(TraceSpoolTest, AppendsCommittedRecordsEightByteAligned) {
  SpoolHeader* spool = Map(1 << 20);
  ASSERT_NE(spool, nullptr);
  ASSERT_TRUE(SpoolAppend(spool, "{\"a\":1}", 7, 101));
  ASSERT_TRUE(SpoolAppend(spool, "{}", 2, 102));
  EXPECT_EQ(spool->offset.load(), kSpoolHeaderBytes + 24 + 24);
  const std::vector<Record> records = Records(spool);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].pid, 101);
  EXPECT_EQ(records[0].json, "{\"a\":1}");
  EXPECT_EQ(records[1].pid, 102);
  EXPECT_EQ(records[1].json, "{}");
  // The bytes on disk are those of the mapping: what a reader sees.
  const int fd = open(path_.c_str(), O_RDONLY);
  char bytes[16];
  ASSERT_EQ(pread(fd, bytes, sizeof(bytes), kSpoolHeaderBytes), 16);
  close(fd);
  EXPECT_EQ(memcmp(bytes, "\xffREC\x07\0\0\0CMIT", 12), 0);
}

TEST_F(TraceSpoolTest, ARecordThatFitsInAPageNeverStraddlesTwo) {
  SpoolHeader* spool = Map(1 << 20);
  ASSERT_NE(spool, nullptr);
  const std::string trace(3000, 't');  // a PostgreSQL backend's, about
  std::vector<uint64_t> starts;
  for (int i = 0; i < 10; ++i) {
    starts.push_back(spool->offset.load());
    ASSERT_TRUE(SpoolAppend(spool, trace.data(), trace.size(), 100 + i));
  }
  EXPECT_EQ(Records(spool).size(), 10u);
  const char* base = reinterpret_cast<const char*>(spool);
  int found = 0;
  for (uint64_t page = 0; page < 11 * kSpoolPage; page += 8) {
    const auto* r = reinterpret_cast<const SpoolRecordHeader*>(base + page);
    if (r->magic != kSpoolRecordMagic) continue;
    ++found;
    EXPECT_EQ(r->state.load(), kSpoolCommitted);
    EXPECT_EQ(page / kSpoolPage, (page + sizeof(*r) + r->length - 1) / kSpoolPage) << page;
  }
  EXPECT_EQ(found, 10);
  // Larger than a page: claimed where the last one ended.
  const std::string big(6000, 'b');
  const uint64_t before = spool->offset.load();
  ASSERT_TRUE(SpoolAppend(spool, big.data(), big.size(), 200));
  EXPECT_EQ(spool->offset.load(), before + ((16 + 6000 + 7) & ~7));
}

TEST_F(TraceSpoolTest, AFullSpoolOrAnOversizedTraceIsRefused) {
  SpoolHeader* spool = Map(kSpoolHeaderBytes + 4096);
  ASSERT_NE(spool, nullptr);
  const std::string trace(1000, 'x');
  int appended = 0;
  while (SpoolAppend(spool, trace.data(), trace.size(), 7)) ++appended;
  EXPECT_EQ(appended, 4);  // 4096 / 1016
  EXPECT_EQ(Records(spool).size(), 4u);
  EXPECT_TRUE(SpoolAppend(spool, "{}", 2, 8));  // a small one still fits
  const std::string huge(kSpoolRecordBound + 1, 'y');
  EXPECT_FALSE(SpoolAppend(spool, huge.data(), huge.size(), 9));
}

TEST_F(TraceSpoolTest, ClaimsStopAtTheAllocatedRoomUntilTheParentReservesMore) {
  SpoolHeader* spool = Map(4 * kSpoolReserveStep);
  ASSERT_NE(spool, nullptr);
  const std::string trace(64 * 1024 - 16, 'z');
  int appended = 0;
  while (SpoolAppend(spool, trace.data(), trace.size(), 7)) ++appended;
  EXPECT_EQ(static_cast<uint64_t>(appended), kSpoolFirstReserve / (64 * 1024) - 1);
  EXPECT_TRUE(SpoolNeedsReserve(spool));
  EXPECT_FALSE(SpoolReserve(spool, path_.c_str(), dev_, ino_ + 1));  // another file: no
  // The room doubles, up to kSpoolReserveStep a time, up to the capacity.
  uint64_t expected = kSpoolFirstReserve;
  while (expected < spool->capacity) {
    ASSERT_TRUE(SpoolReserve(spool, path_.c_str(), dev_, ino_));
    expected += expected < kSpoolReserveStep ? expected : kSpoolReserveStep;
    if (expected > spool->capacity) expected = spool->capacity;
    EXPECT_EQ(spool->allocated.load(), expected);
    EXPECT_TRUE(SpoolAppend(spool, trace.data(), trace.size(), 8));
  }
  EXPECT_FALSE(SpoolNeedsReserve(spool));
  while (SpoolAppend(spool, trace.data(), trace.size(), 9)) {
  }
  EXPECT_TRUE(SpoolHalfFull(spool));
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 4 * kSpoolReserveStep);  // fallocate kept the size
}

TEST_F(TraceSpoolTest, ForkedChildrenAppendConcurrentlyWithoutLosingARecord) {
  SpoolHeader* spool = Map(kSpoolReserveStep);
  ASSERT_NE(spool, nullptr);
  while (spool->allocated.load() < spool->capacity) ASSERT_TRUE(SpoolReserve(spool, path_.c_str(), dev_, ino_));
  constexpr int kChildren = 16, kEach = 200;
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < kEach; ++i) {
        std::string json = "{\"child\":" + std::to_string(c) + ",\"i\":" + std::to_string(i) + ",\"pad\":\"" +
                           std::string(static_cast<size_t>(c * 37 + i) % 300, 'p') + "\"}";
        if (!SpoolAppend(spool, json.data(), json.size(), getpid())) _exit(1);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::map<int, int> by_pid;
  std::vector<Record> records = Records(spool);
  ASSERT_EQ(records.size(), static_cast<size_t>(kChildren * kEach));
  for (const Record& r : records) {
    ++by_pid[r.pid];
    int c = -1, i = -1;
    ASSERT_EQ(sscanf(r.json.c_str(), "{\"child\":%d,\"i\":%d", &c, &i), 2) << r.json;
    EXPECT_EQ(r.json.size(), std::string("{\"child\":" + std::to_string(c) + ",\"i\":" + std::to_string(i) +
                                         ",\"pad\":\"\"}").size() + static_cast<size_t>(c * 37 + i) % 300);
  }
  EXPECT_EQ(by_pid.size(), static_cast<size_t>(kChildren));
  for (const auto& [pid, count] : by_pid) EXPECT_EQ(count, kEach) << pid;
}

// Ask is one child of key's service asking, and writing its trace if told
// to; what it was told.
uint32_t Ask(SpoolHeader* spool, uint32_t key, const ChildTraceSampling& sampling) {
  SpoolSampleSlot* slot = SpoolSampleSlotOf(spool, key);
  if (slot == nullptr) return 1;
  const uint32_t represents = SpoolSampleChild(slot, sampling);
  if (represents != 0) SpoolSampleWritten(slot, represents);
  return represents;
}

// Asks has key's next `n` children ask, and returns what each was told.
std::vector<uint32_t> Asks(SpoolHeader* spool, uint32_t key, int n, const ChildTraceSampling& sampling) {
  std::vector<uint32_t> told;
  for (int i = 0; i < n; ++i) told.push_back(Ask(spool, key, sampling));
  return told;
}

TEST_F(TraceSpoolTest, AServicesFirstChildrenWriteThenTheLastOfEachEvery) {
  SpoolHeader* spool = Map(1 << 20);
  ASSERT_NE(spool, nullptr);
  const ChildTraceSampling sampling{3, 2};  // the first 3, then one in 4
  EXPECT_EQ(Asks(spool, 5432, 15, sampling), (std::vector<uint32_t>{1, 1, 1, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4}));
  const SpoolSampleSlot* slot = SpoolSampleSlotOf(spool, 5432);
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot->seen.load(), 15u);
  EXPECT_EQ(slot->represented.load(), 15u);
  // The last ones before the end, fewer than every, are stood for by none:
  // the reader sees them as seen less represented.
  EXPECT_EQ(Asks(spool, 5432, 2, sampling), (std::vector<uint32_t>{0, 0}));
  EXPECT_EQ(slot->seen.load() - slot->represented.load(), 2u);
  // So is a sampled child that dies before its trace is written.
  EXPECT_EQ(Asks(spool, 5432, 1, sampling), (std::vector<uint32_t>{0}));
  EXPECT_EQ(SpoolSampleChild(SpoolSampleSlotOf(spool, 5432), sampling), 4u);
  EXPECT_EQ(slot->seen.load() - slot->represented.load(), 4u);
}

TEST_F(TraceSpoolTest, EachServiceIsSampledApart) {
  SpoolHeader* spool = Map(1 << 20);
  ASSERT_NE(spool, nullptr);
  const ChildTraceSampling sampling{2, 1};
  const uint32_t a = 1u << 16 | 5432, b = 2u << 16 | 5432;  // a client's and a server's port 5432
  std::vector<uint32_t> told_a, told_b;
  for (int i = 0; i < 6; ++i) {
    told_a.push_back(Ask(spool, a, sampling));
    if (i % 2 == 0) told_b.push_back(Ask(spool, b, sampling));
  }
  EXPECT_EQ(told_a, (std::vector<uint32_t>{1, 1, 0, 2, 0, 2}));
  EXPECT_EQ(told_b, (std::vector<uint32_t>{1, 1, 0}));
  EXPECT_NE(SpoolSampleSlotOf(spool, a), SpoolSampleSlotOf(spool, b));
  // Every 1: every child writes, standing for itself.
  EXPECT_EQ(Asks(spool, 80, 40, ChildTraceSampling{0, 0}), std::vector<uint32_t>(40, 1));
}

TEST_F(TraceSpoolTest, AServiceThatFindsTheSlotsTakenHasNone) {
  SpoolHeader* spool = Map(1 << 20);
  ASSERT_NE(spool, nullptr);
  for (uint32_t key = 0; key < kSpoolSampleSlots; ++key) ASSERT_NE(SpoolSampleSlotOf(spool, key), nullptr);
  EXPECT_EQ(SpoolSampleSlotOf(spool, 100000), nullptr);
  for (uint32_t key = 0; key < kSpoolSampleSlots; ++key) EXPECT_EQ(SpoolSampleSlotOf(spool, key)->key.load(), key + 1);
}

TEST_F(TraceSpoolTest, ForkedChildrenAskingAtOnceAreEachCountedOnce) {
  SpoolHeader* spool = Map(1 << 20);
  ASSERT_NE(spool, nullptr);
  constexpr int kChildren = 16, kEach = 100;
  const ChildTraceSampling sampling{16, 4};
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      uint64_t told = 0;
      for (int i = 0; i < kEach; ++i) told += Ask(spool, 7, sampling);
      _exit(write(pipe_fds[1], &told, sizeof(told)) == sizeof(told) ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  uint64_t total = 0, told = 0;
  for (int c = 0; c < kChildren; ++c) {
    ASSERT_EQ(read(pipe_fds[0], &told, sizeof(told)), static_cast<ssize_t>(sizeof(told)));
    total += told;
  }
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  const SpoolSampleSlot* slot = SpoolSampleSlotOf(spool, 7);
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot->seen.load(), static_cast<uint32_t>(kChildren * kEach));
  EXPECT_EQ(slot->represented.load(), 16 + (kChildren * kEach - 16) / 16 * 16);
  EXPECT_EQ(total, slot->represented.load());
}

}  // namespace
}  // namespace tcpadvise
