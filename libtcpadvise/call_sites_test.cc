#include "call_sites.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "json_writer.h"
#include "socket_state.h"

namespace tcpadvise {
namespace {

// FakeUnwind returns g_fake_depth frames from g_fake_frames.
void* g_fake_frames[40];
int g_fake_depth = 0;
int FakeUnwind(void** frames, int max) {
  const int n = g_fake_depth < max ? g_fake_depth : max;
  memcpy(frames, g_fake_frames, sizeof(void*) * static_cast<size_t>(n));
  return n;
}

std::string Emit(const SocketState* socket, bool open) {
  CallSitesPrepare();
  JsonWriter w;
  w.BeginObject();
  EmitCallSites(&w);
  if (socket != nullptr) EmitSocketCallSites(&w, *socket, open);
  w.EndObject();
  return std::string(w.data(), w.size());
}

class CallSitesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The tree's counts, shared with the fork children as a spool's are.
    void* shared = mmap(nullptr, kTreeFirstSlots * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(shared, MAP_FAILED);
    tree_ = static_cast<std::atomic<uint32_t>*>(shared);
    CallSitesShareTree(tree_);
    CallSitesResetForTest();
    CallSitesConfigure(CallSiteSettings{CallSiteMode::kSample, 4, 8}, FakeUnwind);
  }
  void TearDown() override {
    CallSitesConfigure(CallSiteSettings{CallSiteMode::kOff, 0, 0}, nullptr);
    CallSitesShareTree(nullptr);
    munmap(tree_, kTreeFirstSlots * sizeof(uint32_t));
  }
  std::atomic<uint32_t>* tree_ = nullptr;
};

TEST(CallSiteSettingsTest, ParsesAndRejects) {
  const char* warning = nullptr;
  CallSiteSettings s = ParseCallSiteSettings("all", "3", "128", &warning);
  EXPECT_EQ(warning, nullptr);
  EXPECT_EQ(s.mode, CallSiteMode::kAll);
  EXPECT_EQ(s.first, 3u);
  EXPECT_EQ(s.every, 128u);
  s = ParseCallSiteSettings("most", "-1", "100", &warning);
  EXPECT_NE(warning, nullptr);
  EXPECT_EQ(s.mode, CallSiteMode::kSample);
  EXPECT_EQ(s.first, 4u);
  EXPECT_EQ(s.every, 1024u);
  // Unset: sample a socket's first 4 writes, then one in 1024.
  warning = nullptr;
  s = ParseCallSiteSettings(nullptr, nullptr, nullptr, &warning);
  EXPECT_EQ(warning, nullptr);
  EXPECT_EQ(s.mode, CallSiteMode::kSample);
  EXPECT_EQ(s.first, 4u);
  EXPECT_EQ(s.every, 1024u);
}

TEST_F(CallSitesTest, DueOnFirstWritesThenOneInEvery) {
  int due = 0, odd = 0;
  for (uint64_t n = 1; n <= 80004; ++n) {
    due += CallSiteDue(n);
    odd += n > 4 && n % 2 == 1 && CallSiteDue(n);
  }
  EXPECT_NEAR(due, 4 + 10000, 100);  // the first 4, then about one in 8
  EXPECT_NEAR(odd, 5000, 100);       // odd and even writes alike
  CallSitesConfigure(CallSiteSettings{CallSiteMode::kOff, 4, 8}, FakeUnwind);
  for (uint64_t n = 1; n <= 1000; ++n) EXPECT_FALSE(CallSiteDue(n));
  CallSitesConfigure(CallSiteSettings{CallSiteMode::kAll, 4, 8}, FakeUnwind);
  for (uint64_t n = 1; n <= 1000; ++n) EXPECT_TRUE(CallSiteDue(n));
}

TEST_F(CallSitesTest, DeduplicatesStacksAndCountsPerSocket) {
  // Two stacks from this test's own code, so that they fall in a module.
  g_fake_depth = 2;
  g_fake_frames[0] = reinterpret_cast<void*>(&FakeUnwind);
  g_fake_frames[1] = reinterpret_cast<void*>(&Emit);
  for (int i = 0; i < 3; ++i) SampleCallSite(7, 0, getpid(), 1, 10, i == 0);
  g_fake_frames[1] = reinterpret_cast<void*>(&CallSiteDue);
  SampleCallSite(7, 0, getpid(), 1, 100, false);
  SampleCallSite(9, 0, getpid(), 1, 5, true);
  SocketState socket;
  socket.id.cookie = 7;
  const std::string json = Emit(&socket, true);
  EXPECT_NE(json.find("\"sampled_writes\":5"), std::string::npos) << json;
  EXPECT_NE(json.find("\"writes\":3,\"bytes\":30,\"first_of_burst\":1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"writes\":2,\"bytes\":105,\"first_of_burst\":1"), std::string::npos) << json;
  // Socket 7's own list: 3 writes on one stack and 1 on the other, not socket 9's.
  const size_t own = json.rfind("\"call_sites\":[");
  ASSERT_NE(own, std::string::npos) << json;
  const std::string list = json.substr(own);
  EXPECT_NE(list.find("\"writes\":3,\"bytes\":30"), std::string::npos) << list;
  EXPECT_NE(list.find("\"writes\":1,\"bytes\":100"), std::string::npos) << list;
  EXPECT_EQ(list.find("\"bytes\":5,"), std::string::npos) << list;
  // The frames name this test binary, with its build-id.
  EXPECT_NE(json.find("call_sites_test\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"build_id\":\""), std::string::npos) << json;
}

TEST_F(CallSitesTest, SizesAndBurstPositionsPerStack) {
  g_fake_depth = 1;
  g_fake_frames[0] = reinterpret_cast<void*>(&FakeUnwind);
  // Socket 5: writes 1 (4 B, opens), 2 (8 B), then write 3 opens the next
  // burst: write 2 was last. Then 9 more sizes, one more than kept.
  SampleCallSite(5, 0, getpid(), 1, 4, true);
  SampleCallSite(5, 0, getpid(), 2, 8, false);
  CallSiteBurstEnded(5, 2);
  SampleCallSite(5, 0, getpid(), 3, 4, true);
  CallSiteBurstEnded(5, 3);  // alone in its burst
  CallSiteBurstEnded(5, 1);  // not the socket's last sampled write: nothing
  for (uint64_t size = 1000; size < 10000; size += 1000) SampleCallSite(5, 0, getpid(), 4, size, false);
  const std::string json = Emit(nullptr, false);
  EXPECT_NE(json.find("\"last_of_burst\":2,\"alone_in_burst\":1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"sizes\":{\"unit\":\"bytes\",\"count\":12,\"sum\":45016,\"min\":4,\"max\":9000,"),
            std::string::npos)
      << json;
  // 4 B twice and 8 B in their own buckets, ascending; 6 of the 9 large sizes kept, 3 unbucketed.
  EXPECT_NE(json.find("\"unbucketed\":3,\"buckets\":[[4,2],[8,1],"), std::string::npos) << json;
}

TEST_F(CallSitesTest, TooManySamplesHalveTheRateAndWeighTheirWrites) {
  CallSitesConfigure(CallSiteSettings{CallSiteMode::kSample, 0, 8}, FakeUnwind);
  g_fake_depth = 1;
  g_fake_frames[0] = reinterpret_cast<void*>(&FakeUnwind);
  // 50 samples fit a window of 100 ms; the 51st halves the rate at once.
  for (uint64_t n = 1; n <= 51; ++n) SampleCallSite(1, 0, getpid(), 100 + n, 1, false);
  const std::string json = Emit(nullptr, false);
  EXPECT_NE(json.find("\"every_max\":16,\"every_now\":16,\"slowdowns\":1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"estimated_writes\":416,"), std::string::npos) << json;  // 50 x 8 + 16
  EXPECT_NE(json.find("\"budget_per_second\":500"), std::string::npos) << json;
  EXPECT_EQ(g_call_site_threshold.load(), ~uint64_t{0} / 16);
}

// CountOf reads a count of the trace's call_sites object.
uint64_t CountOf(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  return at == std::string::npos ? ~uint64_t{0} : strtoull(json.c_str() + at + key.size() + 3, nullptr, 10);
}

TEST_F(CallSitesTest, AForkChildLeavesFirstWritesItsTreeHasSampled) {
  g_fake_depth = 1;
  g_fake_frames[0] = reinterpret_cast<void*>(&FakeUnwind);
  // The process that started sampling takes every socket's first writes.
  for (uint64_t cookie = 1; cookie <= 40; ++cookie) SampleCallSite(cookie, 0x10005, getpid(), 1, 10, true);
  EXPECT_EQ(CountOf(Emit(nullptr, false), "sampled_writes"), 40u);
  // Its fork children share one count: 40 children of one connection each,
  // the first write of each; 16 are sampled, then about one in 8.
  for (uint64_t cookie = 100; cookie < 140; ++cookie) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      SampleCallSite(cookie, 0x10005, getpid(), 1, 10, true);
      SampleCallSite(cookie, 0x10005, getpid(), 2, 10, false);  // the first 4 writes each count apart
      const std::string json = Emit(nullptr, false);
      _exit(static_cast<int>(CountOf(json, "sampled_writes") - 40) * 10 +
            static_cast<int>(CountOf(json, "left_to_tree")));
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    const int sampled = WEXITSTATUS(status) / 10, left = WEXITSTATUS(status) % 10;
    EXPECT_EQ(sampled + left, 2) << "child " << cookie - 100;
    if (cookie < 116) {
      EXPECT_EQ(sampled, 2) << "child " << cookie - 100;
    }
  }
  // Another service of the tree has a count of its own; one more first
  // write of the busy one is left to the tree unless its turn came.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SampleCallSite(500, 0x10006, getpid(), 1, 10, true);
    const std::string json = Emit(nullptr, false);
    const bool own = CountOf(json, "sampled_writes") == 41 && CountOf(json, "left_to_tree") == 0;
    SampleCallSite(501, 0x10005, getpid(), 1, 10, true);
    const std::string after = Emit(nullptr, false);
    _exit(own && CountOf(after, "sampled_writes") + CountOf(after, "left_to_tree") == 42 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The process that started sampling still takes its own sockets' first writes.
  SampleCallSite(600, 0x10005, getpid(), 1, 10, true);
  EXPECT_EQ(CountOf(Emit(nullptr, false), "sampled_writes"), 41u);
}

TEST_F(CallSitesTest, FoldMovesASocketsCountsToItsGroup) {
  g_fake_depth = 1;
  g_fake_frames[0] = reinterpret_cast<void*>(&FakeUnwind);
  SampleCallSite(11, 0, getpid(), 1, 4, true);
  SampleCallSite(12, 0, getpid(), 1, 6, true);
  SocketState group;
  CallSitesFold(11, &group);
  CallSitesFold(12, &group);
  SocketState live;
  live.id.cookie = 11;
  EXPECT_EQ(Emit(&live, true).find("\"call_sites\":["), std::string::npos);
  const std::string json = Emit(&group, false);
  const std::string list = json.substr(json.rfind("\"call_sites\":["));
  EXPECT_NE(list.find("\"bytes\":4,"), std::string::npos) << list;
  EXPECT_NE(list.find("\"bytes\":6,"), std::string::npos) << list;
}

// SocketList is the call-site list EmitSocketCallSites writes for socket.
std::string SocketList(const SocketState& socket, bool open) {
  const std::string json = Emit(&socket, open);
  const size_t at = json.rfind("\"call_sites\":[");
  return at == std::string::npos ? std::string() : json.substr(at);
}

// The pairs are handed out densely, 2048 at most: a socket past them has its
// writes counted as dropped, every other finds its own pair, live or folded.
TEST_F(CallSitesTest, EverySocketFindsItsOwnPairUpToTheTablesEnd) {
  g_fake_depth = 1;
  g_fake_frames[0] = reinterpret_cast<void*>(&FakeUnwind);
  for (uint64_t cookie = 1; cookie <= 2100; ++cookie) SampleCallSite(cookie, 0, getpid(), 1, 1000 + cookie, true);
  EXPECT_NE(Emit(nullptr, false).find("\"dropped_writes\":52"), std::string::npos);
  for (uint64_t cookie : {1, 777, 2048}) {
    SocketState live;
    live.id.cookie = cookie;
    const std::string list = SocketList(live, true);
    EXPECT_NE(list.find("\"bytes\":" + std::to_string(1000 + cookie) + ","), std::string::npos) << cookie << list;
    EXPECT_EQ(list.find("\"writes\":2"), std::string::npos) << list;
  }
  SocketState dropped;
  dropped.id.cookie = 2100;
  EXPECT_EQ(SocketList(dropped, true), "");
  SampleCallSite(777, 0, getpid(), 2, 1, false);  // a known pair still counts when the table is full
  SocketState group;
  CallSitesFold(777, &group);
  const std::string folded = SocketList(group, false);
  EXPECT_NE(folded.find("\"writes\":2,\"bytes\":1778,"), std::string::npos) << folded;
}

// Threads that sample the same sockets at once share one pair per socket:
// no count is lost or split.
TEST_F(CallSitesTest, RacingThreadsShareOnePairPerSocket) {
  g_fake_depth = 1;
  g_fake_frames[0] = reinterpret_cast<void*>(&FakeUnwind);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (uint64_t cookie = 1; cookie <= 300; ++cookie) SampleCallSite(cookie, 0, getpid(), 1, 10, false);
    });
  }
  for (std::thread& t : threads) t.join();
  for (uint64_t cookie : {1, 150, 300}) {
    SocketState live;
    live.id.cookie = cookie;
    const std::string list = SocketList(live, true);
    EXPECT_NE(list.find("\"writes\":4,\"bytes\":40,"), std::string::npos) << cookie << list;
  }
}

TEST_F(CallSitesTest, UnknownCodeAndEmptyStacksFailOpen) {
  g_fake_depth = 1;
  g_fake_frames[0] = reinterpret_cast<void*>(uintptr_t{0x10});  // no module holds it (JIT, garbage)
  SampleCallSite(1, 0, getpid(), 1, 1, true);
  g_fake_depth = 0;
  SampleCallSite(1, 0, getpid(), 1, 1, true);
  const std::string json = Emit(nullptr, false);
  EXPECT_NE(json.find("\"frames\":[[-1,16]]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"unwind_failures\":1"), std::string::npos) << json;
}

TEST_F(CallSitesTest, FullTablesCountWhatTheyDrop) {
  g_fake_depth = 1;
  for (uintptr_t i = 0; i < 600; ++i) {
    g_fake_frames[0] = reinterpret_cast<void*>(0x1000 + i);
    SampleCallSite(1 + i % 3, 0, getpid(), 1, 1, false);
  }
  const std::string json = Emit(nullptr, false);
  EXPECT_NE(json.find("\"dropped_writes\":88"), std::string::npos) << json;
}

// ForkingUnwind is an unwind that a signal handler interrupts to fork (as a
// server may fork from a handler).
pid_t g_handler_fork = -1;
int g_forking_unwinds = 0;
void ForkInHandler(int) { g_handler_fork = fork(); }
int ForkingUnwind(void** frames, int max) {
  ++g_forking_unwinds;
  raise(SIGUSR1);
  return FakeUnwind(frames, max);
}

TEST_F(CallSitesTest, AHandlerForkingInsideAnUnwindWaitsForNothing) {
  static const bool registered =
      pthread_atfork(CallSitesBeforeFork, CallSitesAfterForkInParent, CallSitesAfterForkInChild) == 0;
  ASSERT_TRUE(registered);
  struct sigaction sa, old;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = ForkInHandler;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  alarm(20);  // a wait on the lock this thread holds would be for ever
  CallSitesConfigure(CallSiteSettings{CallSiteMode::kAll, 0, 1}, ForkingUnwind);
  g_fake_depth = 1;
  g_fake_frames[0] = reinterpret_cast<void*>(&FakeUnwind);
  SampleCallSite(7, 0, getpid(), 1, 10, true);
  if (g_handler_fork == 0) {
    // The child samples nothing more: the unwinder is gone.
    SampleCallSite(7, 0, getpid(), 2, 10, false);
    _exit(g_forking_unwinds == 1 ? 0 : 1);
  }
  ASSERT_GT(g_handler_fork, 0);
  int status = 0;
  ASSERT_EQ(waitpid(g_handler_fork, &status, 0), g_handler_fork);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // The parent's lock was let go: a fork now takes it.
  const pid_t later = fork();
  if (later == 0) _exit(0);
  ASSERT_EQ(waitpid(later, &status, 0), later);
  alarm(0);
  sigaction(SIGUSR1, &old, nullptr);
}

TEST_F(CallSitesTest, RealUnwinderNamesThisFunction) {
  void* handle = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) GTEST_SKIP() << "libunwind.so.8 is not installed";
  CallSitesConfigure(CallSiteSettings{CallSiteMode::kAll, 0, 1},
                     reinterpret_cast<UnwindFn>(dlsym(handle, "unw_backtrace")));
  SampleCallSite(3, 0, getpid(), 1, 8, true);
  const std::string json = Emit(nullptr, false);
  EXPECT_NE(json.find("\"unwind_failures\":0"), std::string::npos) << json;
  EXPECT_NE(json.find("\"frames\":[[0,"), std::string::npos) << json;
}

}  // namespace
}  // namespace tcpadvise
