#include "trace_writer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/utsname.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "json_writer.h"
#include "runtime.h"
#include "socket_table.h"

namespace tcpadvise {
namespace {

SocketIdentity Client(uint16_t peer_port) {
  SocketIdentity id;
  id.role = Role::kClient;
  auto* peer = reinterpret_cast<sockaddr_in*>(&id.peer);
  peer->sin_family = AF_INET;
  peer->sin_port = htons(peer_port);
  id.local.ss_family = AF_INET;
  return id;
}

std::string Serialize() {
  JsonWriter w;
  g_table.Lock();
  const bool any = SerializeTrace(&w, /*final=*/false);
  g_table.Unlock();
  return any ? std::string(w.data(), w.size()) : std::string();
}

class TraceWriterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { g_table.Init(); }
  // g_table is the process's one table and keeps the groups of every socket
  // closed before: each test starts from none, whatever ran before it.
  void SetUp() override { g_table.ForgetGroupsAndFreeEntries(); }
};

TEST_F(TraceWriterTest, NothingToReportWritesNothing) { EXPECT_EQ(Serialize(), ""); }

// Burst sizes borrow write_size's buckets while every burst is one write:
// the trace still shows the closed bursts and the live socket's open one,
// and the group after close the same.
TEST_F(TraceWriterTest, BurstSizesReadTheSameWhenTheyBorrowWriteSizes) {
  SocketState* s = g_table.Track(701, Client(81));
  s->OnWrite(WriteApi::kSend, 5, 0, kScalarWrite, 100, 0);
  s->OnRead(ReadApi::kRecv, 2, 0, false);
  s->OnWrite(WriteApi::kSend, 300, 0, kScalarWrite, 200, 0);  // open
  ASSERT_EQ(&s->stats.BurstBytesBuckets(), &s->stats.write_size);
  const std::string bursts =
      "\"bytes\":{\"unit\":\"bytes\",\"count\":2,\"sum\":305,\"min\":5,\"max\":300,\"sub_buckets\":128,"
      "\"scale\":1,\"buckets\":[[5,1],[" + std::to_string(HistogramBucketOf(300)) + ",1]]}";
  EXPECT_NE(Serialize().find(bursts), std::string::npos) << Serialize();
  g_table.Release(701);
  const std::string json = Serialize();
  EXPECT_NE(json.find("\"kind\":\"group\""), std::string::npos);
  EXPECT_NE(json.find(bursts), std::string::npos) << json;
}

// A snapshot of a sampled socket taken mid-burst: calls and turns exact,
// the turns recorded said, the open burst counted with its period's weight
// (none when its period is not recorded), the settings in the trace.
TEST_F(TraceWriterTest, ASnapshotMidBurstOfASampledSocket) {
  const TurnSampling saved = g_runtime.settings.turns;
  g_runtime.settings.turns = TurnSampling{/*first=*/2, /*every_shift=*/1};
  SocketState* s = g_table.Track(702, Client(82));
  uint64_t tick = ReadTicks() - 1000000;
  auto write = [&] {
    const uint32_t code = s->WriteCode(g_runtime.settings.turns);
    s->OnWrite(WriteApi::kSend, 10, 0, kScalarWrite, code != kUnrecordedCode ? (tick += 100) : 0, 0, code);
  };
  for (int turn = 0; turn < 9; ++turn) {
    write();
    s->OnRead(ReadApi::kRecv, 3, 0, false);
  }
  write();  // turn 9 opens: the open burst
  const bool open_recorded = s->stats.PeriodWeight() != 0;
  const std::string trace = Serialize();
  EXPECT_NE(trace.find("\"turn_sampling\":{\"first\":2,\"every\":2}"), std::string::npos) << trace;
  EXPECT_NE(trace.find("\"writes\":{\"calls\":10,\"bytes\":100,"), std::string::npos) << trace;
  // Turns 0 and 1 in full, then one of 2-3, 4-5 and 6-7, and perhaps 8.
  const uint64_t recorded = s->turns_recorded.Get();
  EXPECT_TRUE(recorded == 5 || recorded == 6) << recorded;
  EXPECT_NE(trace.find("\"turns\":{\"count\":9,\"sampled\":{\"recorded\":" + std::to_string(recorded) + "}"),
            std::string::npos)
      << trace;
  // The closed bursts estimated (2 + 2 a recorded turn past the first), the open one with its weight.
  const uint64_t bursts = 2 + 2 * (recorded - 2) + (open_recorded ? 2 : 0);
  EXPECT_NE(trace.find("\"bursts\":{\"count\":" + std::to_string(bursts) + ",\"open\":" +
                       (open_recorded ? "true" : "false")),
            std::string::npos)
      << trace;
  g_table.Release(702);
  g_runtime.settings.turns = saved;
}

TEST_F(TraceWriterTest, AnIpv4AddressIsWrittenAsInetNtopWritesIt) {
  for (const char* text : {"10.200.3.255", "127.0.0.1", "255.255.255.255", "1.2.30.100"}) {
    SocketIdentity id = Client(443);
    ASSERT_EQ(inet_pton(AF_INET, text, &reinterpret_cast<sockaddr_in*>(&id.peer)->sin_addr), 1);
    g_table.Track(703, id)->OnRead(ReadApi::kRecv, 2, 0, false);
    const std::string json = Serialize();
    EXPECT_NE(json.find("\"peer\":{\"addr\":\"" + std::string(text) + "\",\"port\":443}"), std::string::npos)
        << json;
    g_table.Release(703);
  }
}

TEST_F(TraceWriterTest, ALiveSocketAppearsWithItsCounts) {
  SocketState* s = g_table.Track(700, Client(80));
  s->OnWrite(WriteApi::kSend, 5, 0, kScalarWrite, 100, 0);
  s->OnRead(ReadApi::kRecv, 2, 0, false);
  const std::string json = Serialize();
  EXPECT_NE(json.find("\"schema\":\"https://tcpadvise.dev/schemas/trace/1\""), std::string::npos);
  EXPECT_NE(json.find("\"kind\":\"socket\""), std::string::npos);
  EXPECT_NE(json.find("\"by_api\":{\"send\":1}"), std::string::npos);
  EXPECT_NE(json.find("\"peer\":{\"addr\":\"0.0.0.0\",\"port\":80}"), std::string::npos);
  g_table.Release(700);
  EXPECT_NE(Serialize().find("\"kind\":\"group\""), std::string::npos);
}

// The trace names the host it was written on (uname's nodename), for reports
// that merge the traces of many hosts.
TEST_F(TraceWriterTest, TheTraceNamesItsHost) {
  struct utsname uts;
  ASSERT_EQ(uname(&uts), 0);
  g_table.Track(701, Client(80))->OnRead(ReadApi::kRecv, 2, 0, false);
  EXPECT_NE(Serialize().find(std::string("\"host\":\"") + uts.nodename + "\""), std::string::npos);
  g_table.Release(701);
}

// A write-only stream's unfinished burst counts in the trace, on a copy:
// the socket's own burst goes on, and closing it counts it once.
TEST_F(TraceWriterTest, ALiveSocketsOpenBurstCountsWithoutEndingIt) {
  SocketState* s = g_table.Track(701, Client(81));
  s->id.cookie = 4242;
  for (int i = 0; i < 3; ++i) s->OnWrite(WriteApi::kWrite, 128, 0, kScalarWrite, 0, 0);
  std::string json = Serialize();
  EXPECT_NE(json.find("\"cookie\":4242,\"inherited\":false,\"used\":true,\"shape\":\"write-only\""),
            std::string::npos);
  EXPECT_NE(json.find("\"bursts\":{\"count\":1,\"open\":true"), std::string::npos);
  EXPECT_EQ(s->stats.burst_open_writes.Get(), 3u);
  EXPECT_EQ(s->stats.BurstCount(), 0u);
  s->OnWrite(WriteApi::kWrite, 128, 0, kScalarWrite, 0, 0);
  g_table.Release(701);
  json = Serialize();
  EXPECT_NE(json.find("\"bursts\":{\"count\":1,\"open\":false"), std::string::npos);
  EXPECT_NE(json.find("\"cookie\":4242"), std::string::npos);  // a group of one keeps it
}

// Closed sockets fold by shape: a write-only stream and a request-response
// connection to one port stay two groups; a second request-response one
// joins its group, which then keeps no cookie.
TEST_F(TraceWriterTest, ClosedSocketsOfDifferentShapesStayApart) {
  for (int c = 0; c < 3; ++c) {
    SocketState* s = g_table.Track(702, Client(82));
    s->id.cookie = 100 + c;
    s->OnWrite(WriteApi::kWrite, c == 0 ? 65536 : 40, 0, kScalarWrite, 0, 0);
    if (c != 0) s->OnRead(ReadApi::kRead, 10, 0, false);
    g_table.Release(702);
  }
  int groups = 0;
  g_table.Lock();
  g_table.ForEachGroup([&](SocketState* g) {
    ++groups;
    const bool stream = KindOfShape(g->id.shape) == ShapeKind::kWriteOnly;
    EXPECT_EQ(g->connections, stream ? 1u : 2u);
    EXPECT_EQ(g->id.cookie, stream ? 100u : 0u);
  });
  g_table.Unlock();
  EXPECT_EQ(groups, 2);
}

// CookieCounts counts each cookie from 1 to max in a trace.
std::vector<int> CookieCounts(const std::string& json, int max) {
  std::vector<int> counts(max + 1, 0);
  for (size_t at = json.find("\"cookie\":"); at != std::string::npos; at = json.find("\"cookie\":", at + 1)) {
    const unsigned long cookie = std::stoul(json.substr(at + 9, 12));
    EXPECT_LE(cookie, static_cast<unsigned long>(max));
    if (cookie <= static_cast<unsigned long>(max)) ++counts[cookie];
  }
  return counts;
}

// A snapshot of many live sockets lets go of the lock between runs of them,
// while the application closes sockets: none appears twice (each has its
// own group key, so a closed one keeps its cookie in its group).
TEST_F(TraceWriterTest, ASnapshotThatLetsGoOfTheLockCountsNoSocketTwice) {
  constexpr int kSockets = 1000, kFirstFd = 2000;
  for (int i = 0; i < kSockets; ++i) {
    SocketState* s = g_table.Track(kFirstFd + i, Client(static_cast<uint16_t>(20000 + i)));
    s->id.cookie = 1 + i;
    s->OnWrite(WriteApi::kWrite, 10, 0, kScalarWrite, 0, 0);
  }
  std::atomic<bool> started{false};
  std::thread closer([&] {
    while (!started.load()) std::this_thread::yield();
    for (int i = kSockets - 1; i >= 0; --i) g_table.Release(kFirstFd + i);
  });
  started.store(true);
  const std::string json = Serialize();
  closer.join();
  const std::vector<int> seen = CookieCounts(json, kSockets);
  for (int cookie = 1; cookie <= kSockets; ++cookie) EXPECT_LE(seen[cookie], 1) << cookie;
  // Every socket is in the next snapshot, closed.
  const std::vector<int> after = CookieCounts(Serialize(), kSockets);
  for (int cookie = 1; cookie <= kSockets; ++cookie) EXPECT_EQ(after[cookie], 1) << cookie;
}

// Application threads write, read, open and close sockets while a snapshot
// is serialised over and over: run under ThreadSanitizer in CI, and the
// totals must come out exact because each socket has one writer.
TEST_F(TraceWriterTest, SnapshotsRunConcurrentlyWithApplicationThreads) {
  constexpr int kThreads = 4, kConnections = 50, kWrites = 40;
  std::atomic<bool> snapshotting{false}, done{false};
  std::thread snapshotter([&] {
    while (!done.load()) {
      snapshotting.store(true);
      const std::string json = Serialize();
      EXPECT_TRUE(json.empty() || json.find("\"sockets\":[") != std::string::npos);
    }
  });
  // The writers start only once snapshots are being taken, so the two overlap.
  while (!snapshotting.load()) std::this_thread::yield();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      const int fd = 800 + t;
      for (int c = 0; c < kConnections; ++c) {
        SocketState* s = g_table.Track(fd, Client(static_cast<uint16_t>(9000 + t)));
        for (int w = 0; w < kWrites; ++w) s->OnWrite(WriteApi::kWrite, 10, 0, kScalarWrite, w, 0);
        s->OnRead(ReadApi::kRead, 1, 0, false);
        g_table.Release(fd);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  done.store(true);
  snapshotter.join();
  uint64_t writes = 0, connections = 0;
  g_table.Lock();
  g_table.ForEachGroup([&](SocketState* g) {
    if (g->id.ServicePort() >= 9000) {
      writes += g->stats.write_calls.Get();
      connections += g->connections;
    }
  });
  g_table.Unlock();
  EXPECT_EQ(connections, uint64_t{kThreads} * kConnections);
  EXPECT_EQ(writes, uint64_t{kThreads} * kConnections * kWrites);
}

// The reference vectors (key 00..0f; messages of 0 and 24 bytes 00, 01, ...),
// as `openssl mac -macopt hexkey:000102030405060708090a0b0c0d0e0f -macopt
// size:8 SIPHASH` gives them, read as little-endian words.
TEST(SipHash24Test, MatchesTheReferenceVectors) {
  const uint64_t key[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  EXPECT_EQ(SipHash24(key, nullptr, 0), 0x726fdb47dd0e0e31ull);
  const uint64_t words[3] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull, 0x1716151413121110ull};
  EXPECT_EQ(SipHash24(key, words, 3), 0xb8ad50c6f649af94ull);
}

}  // namespace
}  // namespace tcpadvise
