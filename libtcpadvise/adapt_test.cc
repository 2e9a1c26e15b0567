#include "adapt.h"

#include <gtest/gtest.h>

#include <random>
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


// A steady shape (AdaptSteady) is one that AdaptWrite leaves as it is for a
// burst's first write, passing it, switching nothing, whatever the
// thresholds: the write path skips AdaptWrite there (policy.h: PassesUnheld).
TEST(AdaptTest, ASteadyShapeIsLeftAsItIsAndPasses) {
  int steady = 0;
  for (const bool active : {false, true}) {
    for (uint32_t streak = 0; streak < 4; ++streak) {
      for (uint32_t writes = 0; writes < 4; ++writes) {
        const AdaptiveShape a{active, streak, writes};
        if (!AdaptSteady(a)) continue;
        ++steady;
        for (uint32_t enter = 1; enter <= 3; ++enter) {
          for (uint32_t leave = 1; leave <= 4; ++leave) {
            AdaptiveShape b = a;
            bool switched;
            EXPECT_EQ(AdaptWrite(&b, true, enter, leave, &switched), AdaptDecision::kPass);
            EXPECT_FALSE(switched);
            EXPECT_TRUE(AdaptSteady(b));
            EXPECT_EQ(b.burst_writes, a.burst_writes);
            EXPECT_EQ(b.streak, a.streak);
          }
        }
      }
    }
  }
  EXPECT_EQ(steady, 1);
  EXPECT_FALSE(AdaptSteady(AdaptiveShape{}));  // no burst yet: AdaptWrite's to decide
}

// Bursts of random shapes, through AdaptWrite alone and with a burst's first
// write skipped whenever the shape is steady: the same decisions, switches
// and shapes.
TEST(AdaptTest, SkippingSteadyFirstWritesMatchesTheRuleAlone) {
  std::mt19937 rng(16);
  for (int round = 0; round < 50; ++round) {
    const uint32_t enter = 1 + rng() % 3, leave = 1 + rng() % 4;
    AdaptiveShape rule, skipping;
    int skipped = 0;
    for (int burst = 0; burst < 200; ++burst) {
      // Runs of one shape with changes, as a real socket has.
      const int writes = (burst / 20 + round) % 3 == 0 ? 1 + static_cast<int>(rng() % 4) : (rng() % 8 == 0 ? 2 : 1);
      for (int i = 0; i < writes; ++i) {
        bool switched_rule, switched_skipping = false;
        const AdaptDecision d_rule = AdaptWrite(&rule, i == 0, enter, leave, &switched_rule);
        AdaptDecision d_skipping = AdaptDecision::kPass;
        if (i == 0 && AdaptSteady(skipping)) {
          ++skipped;
        } else {
          d_skipping = AdaptWrite(&skipping, i == 0, enter, leave, &switched_skipping);
        }
        ASSERT_EQ(d_skipping, d_rule) << "round " << round << " burst " << burst << " write " << i;
        ASSERT_EQ(switched_skipping, switched_rule);
        ASSERT_EQ(skipping.active, rule.active);
        ASSERT_EQ(skipping.streak, rule.streak);
        ASSERT_EQ(skipping.burst_writes, rule.burst_writes);
      }
    }
    EXPECT_GT(skipped, 0);
  }
}

}  // namespace
}  // namespace tcpadvise
