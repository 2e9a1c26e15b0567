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
  EXPECT_EQ(s.stats.gap_ticks.Summary().min, HistogramBucketLow(HistogramBucketOf(500, 44)));
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

TEST(SocketStateTest, MarkSentMovesOnlyThePendingSentTimeNotTheTurnStart) {
  SocketState s;
  s.MarkSent(5000);  // nothing written: no turn to move
  EXPECT_EQ(s.stats.last_write_start.Get(), 0u);
  s.OnWrite(WriteApi::kWrite, 2, 0, kScalarWrite, 1000, 0);
  s.MarkSent(5000);
  EXPECT_EQ(s.stats.last_write_start.Get(), 5000u);
  EXPECT_EQ(s.stats.turn_start.Get(), 1000u);
  s.OnRead(ReadApi::kRead, 2, 0, false);
  s.MarkSent(9000);  // the reply came: the turn is closed
  EXPECT_EQ(s.stats.last_write_start.Get(), 0u);
  EXPECT_EQ(s.stats.turn_ticks.count(), 1u);
  EXPECT_EQ(s.stats.sent_to_reply_ticks.count(), 1u);
}

TEST(SocketStateTest, TheTurnStartsAtTheFirstWriteAfterAReplyAndOutlivesEmptyReads) {
  SocketState s;
  s.OnWrite(WriteApi::kWrite, 2, 0, kScalarWrite, 1000, 0);
  s.OnRead(ReadApi::kRead, -1, EAGAIN, false);  // closes the burst, not the turn
  s.OnWrite(WriteApi::kWrite, 2, 0, kScalarWrite, 3000, 0);
  EXPECT_EQ(s.stats.turn_start.Get(), 1000u);
  EXPECT_EQ(s.stats.last_write_start.Get(), 3000u);
  s.OnRead(ReadApi::kRead, 2, 0, false);
  EXPECT_EQ(s.stats.turn_ticks.count(), 1u);
  EXPECT_EQ(s.stats.sent_to_reply_ticks.count(), 1u);
  s.OnWrite(WriteApi::kWrite, 2, 0, kScalarWrite, 7000, 0);  // the next turn
  EXPECT_EQ(s.stats.turn_start.Get(), 7000u);
}

}  // namespace
}  // namespace tcpadvise
