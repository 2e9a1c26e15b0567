#include "socket_state.h"

#include <errno.h>
#include <gtest/gtest.h>

namespace tcpadvise {
namespace {

TEST(SocketStateTest, TimedWritesRecordGapsAndTheReplyClosesTheTurn) {
  SocketState s;
  s.OnWrite(WriteApi::kWrite, 2, 0, kScalarWrite, 1000, 0);
  s.OnWrite(WriteApi::kWrite, 2, 0, kScalarWrite, 1500, 0);
  EXPECT_EQ(s.stats.gap_ticks.count(), 1u);
  EXPECT_EQ(s.stats.gap_ticks.Summary().min, 500u);
  EXPECT_EQ(s.stats.last_write_start.Get(), 1500u);
  s.OnRead(ReadApi::kRead, 2, 0, false);
  EXPECT_EQ(s.stats.turn_ticks.count(), 1u);
  EXPECT_EQ(s.stats.burst_writes.count(), 1u);
  EXPECT_EQ(s.stats.last_write_start.Get(), 0u);
}

TEST(SocketStateTest, UntimedWritesCountButRecordNoGapAndKeepTheTurnStart) {
  SocketState s;
  s.OnWrite(WriteApi::kWrite, 2, 0, kScalarWrite, 1000, 0);
  s.OnWrite(WriteApi::kWrite, 2, 0, kScalarWrite, 0, 0);
  s.OnWrite(WriteApi::kWrite, 2, 0, kScalarWrite, 0, 0);
  EXPECT_EQ(s.stats.write_calls.Get(), 3u);
  EXPECT_EQ(s.stats.burst_open_writes.Get(), 3u);
  EXPECT_EQ(s.stats.gap_ticks.count(), 0u);
  EXPECT_EQ(s.stats.last_write_start.Get(), 1000u);
}

TEST(SocketStateTest, StartTurnAtMovesOnlyAPendingTurn) {
  SocketState s;
  s.StartTurnAt(5000);  // nothing written: no turn to move
  EXPECT_EQ(s.stats.last_write_start.Get(), 0u);
  s.OnWrite(WriteApi::kWrite, 2, 0, kScalarWrite, 1000, 0);
  s.StartTurnAt(5000);
  EXPECT_EQ(s.stats.last_write_start.Get(), 5000u);
  s.OnRead(ReadApi::kRead, 2, 0, false);
  s.StartTurnAt(9000);  // the reply came: the turn is closed
  EXPECT_EQ(s.stats.last_write_start.Get(), 0u);
}

TEST(SocketStateTest, ErrnoCountsGrowPastTheInlineSlotsAndMerge) {
  SocketState a, b, group;
  for (int e : {EAGAIN, EAGAIN, EPIPE, ECONNRESET, EPIPE, 9999}) a.CountError(e);
  b.CountError(ECONNRESET);
  EXPECT_EQ(a.stats.errors.Get(EAGAIN), 2u);
  EXPECT_EQ(a.stats.errors.Get(EPIPE), 2u);
  EXPECT_EQ(a.stats.errors.Get(ECONNRESET), 1u);
  EXPECT_EQ(a.stats.errors.Get(0), 1u);  // beyond the table
  EXPECT_EQ(a.stats.errors.Total(), 6u);
  group.stats.MergeFrom(a.stats);
  group.stats.MergeFrom(b.stats);
  EXPECT_EQ(group.stats.errors.Get(ECONNRESET), 2u);
  EXPECT_EQ(group.stats.errors.Total(), 7u);
  EXPECT_EQ(group.stats.errors.lost(), 0u);
  group.stats.Reset();
  EXPECT_EQ(group.stats.errors.Total(), 0u);
}

// An open connection's whole entry stays within the 2 KB budget (issue 13;
// bench/memory_per_connection.py measures it in RSS): no dense array is
// allocated for a socket that sees few distinct sizes, times and errnos.
TEST(SocketStateTest, AConnectionWithFewDistinctValuesCostsUnderTwoKilobytes) {
  EXPECT_LE(sizeof(SocketState), 1536u);  // a jemalloc size class well below 2 KiB
  SocketState s;
  for (uint64_t round = 0; round < 100; ++round) {
    s.OnWrite(WriteApi::kWrite, 512, 0, kScalarWrite, 1000 * round + 1, 40 + round % 3);
    s.OnRead(ReadApi::kRead, 64, 0, false);
    s.OnRead(ReadApi::kRead, -1, EAGAIN, false);
  }
  const SocketStats& st = s.stats;
  for (const Histogram* h : {&st.write_size, &st.write_iovcnt, &st.write_ticks, &st.gap_ticks, &st.burst_writes,
                             &st.burst_bytes, &st.read_size}) {
    EXPECT_EQ(h->HeapBytes(), 0u);
  }
  EXPECT_EQ(st.errors.HeapBytes(), 0u);
  EXPECT_EQ(st.write_size.Percentile(0.5), 512u);
  EXPECT_EQ(st.burst_writes.count(), 100u);
}

}  // namespace
}  // namespace tcpadvise
