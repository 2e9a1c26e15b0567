#include "socket_state.h"

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

}  // namespace
}  // namespace tcpadvise
