#include "adapt.h"

#include <gtest/gtest.h>

#include <vector>

namespace tcpadvise {
namespace {

// Decisions runs bursts of the given write counts through the rule (enter 2,
// leave 4) and returns, per burst, whether its first write was acted on.
std::vector<bool> FirstWriteActed(AdaptiveShape* a, const std::vector<int>& bursts, int* switches) {
  std::vector<bool> acted;
  for (int writes : bursts) {
    for (int i = 0; i < writes; ++i) {
      bool switched;
      const AdaptDecision d = AdaptWrite(a, i == 0, 2, 4, &switched);
      *switches += switched;
      if (i == 0) {
        acted.push_back(d == AdaptDecision::kAct);
      } else {
        EXPECT_EQ(d, AdaptDecision::kAct) << "a burst's later writes are always acted on";
      }
    }
  }
  return acted;
}

TEST(AdaptTest, SingleWriteBurstsAlwaysPass) {
  AdaptiveShape a;
  int switches = 0;
  const std::vector<bool> acted = FirstWriteActed(&a, std::vector<int>(100, 1), &switches);
  for (bool b : acted) EXPECT_FALSE(b);
  EXPECT_EQ(switches, 0);
  EXPECT_FALSE(a.active);
}

TEST(AdaptTest, MultiWriteBurstsTurnActiveAfterEnterBursts) {
  AdaptiveShape a;
  int switches = 0;
  // The first two multi-write bursts are seen; the third starts active.
  EXPECT_EQ(FirstWriteActed(&a, {3, 2, 2, 5}, &switches), (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(switches, 1);
  EXPECT_TRUE(a.active);
}

TEST(AdaptTest, HysteresisNeedsLeaveBurstsInARow) {
  AdaptiveShape a;
  int switches = 0;
  FirstWriteActed(&a, {2, 2, 2}, &switches);
  ASSERT_TRUE(a.active);
  // Three single-write bursts, then a multi-write one: the streak restarts.
  EXPECT_EQ(FirstWriteActed(&a, {1, 1, 1, 2, 1, 1, 1}, &switches),
            (std::vector<bool>{true, true, true, true, true, true, true}));
  EXPECT_TRUE(a.active);
  // The fourth single-write burst in a row is closed at the next burst's start.
  EXPECT_EQ(FirstWriteActed(&a, {1, 1}, &switches), (std::vector<bool>{true, false}));
  EXPECT_FALSE(a.active);
  EXPECT_EQ(switches, 2);
}

TEST(AdaptTest, AlternatingShapesDoNotFlip) {
  AdaptiveShape a;
  int switches = 0;
  std::vector<int> bursts;
  for (int i = 0; i < 50; ++i) bursts.insert(bursts.end(), {1, 3});
  FirstWriteActed(&a, bursts, &switches);
  EXPECT_EQ(switches, 0);
  EXPECT_FALSE(a.active);
}

TEST(AdaptTest, ShapeChangesMidLife) {
  AdaptiveShape a;
  int switches = 0;
  std::vector<int> bursts(20, 1);
  bursts.insert(bursts.end(), 20, 4);  // starts writing in pieces
  bursts.insert(bursts.end(), 20, 1);  // and back to one write
  const std::vector<bool> acted = FirstWriteActed(&a, bursts, &switches);
  EXPECT_FALSE(acted[19]);
  EXPECT_FALSE(acted[21]);
  EXPECT_TRUE(acted[22]);
  EXPECT_TRUE(acted[39]);
  EXPECT_TRUE(acted[43]);
  EXPECT_FALSE(acted[44]);
  EXPECT_EQ(switches, 2);
}

TEST(AdaptTest, EndBurstIgnoresEmptyBursts) {
  AdaptiveShape a;
  EXPECT_FALSE(AdaptEndBurst(&a, 0, 1, 1));
  EXPECT_TRUE(AdaptEndBurst(&a, 2, 1, 1));
  EXPECT_TRUE(a.active);
}

}  // namespace
}  // namespace tcpadvise
