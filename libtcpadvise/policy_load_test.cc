#include "policy_load.h"

#include <gtest/gtest.h>

#include "policy.h"

namespace tcpadvise {
namespace {

// This test binary has no libtcpadvise_config.so beside it: the config
// cannot be used, the program is only observed, and the trace will say so.
TEST(PolicyLoadTest, AConfigThatCannotBeUsedLeavesTheProgramObservedAndSaysSo) {
  LoadPolicyConfig("/nonexistent/policy.yaml");
  EXPECT_EQ(g_policy_config, nullptr);
  EXPECT_TRUE(g_config_problem);
  ASSERT_NE(PolicyFailOpenReason(), nullptr);
  EXPECT_STREQ(PolicyFailOpenReason(), "the policy config could not be used");
}

TEST(PolicyLoadTest, FailOpenKeepsTheFirstReason) {
  PolicyFailOpen("first");
  PolicyFailOpen("second");
  EXPECT_STREQ(PolicyFailOpenReason(), "first");
}

}  // namespace
}  // namespace tcpadvise
