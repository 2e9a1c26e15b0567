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
  EXPECT_EQ(spool->version, 1u);
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
  SpoolHeader* spool = Map(4096);
  ASSERT_NE(spool, nullptr);
  const std::string trace(1000, 'x');
  int appended = 0;
  while (SpoolAppend(spool, trace.data(), trace.size(), 7)) ++appended;
  EXPECT_EQ(appended, 3);  // (4096 - 64) / 1016
  EXPECT_EQ(Records(spool).size(), 3u);
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

}  // namespace
}  // namespace tcpadvise
