#include "runtime.h"

#include <gtest/gtest.h>

#include <string.h>

namespace tcpadvise {
namespace {

bool Names(const char* warning, const char* setting) { return warning != nullptr && strstr(warning, setting) != nullptr; }

TEST(RuntimeTest, TurnSamplingReadsGoodSettingsWithoutAWarning) {
  const char* warning = "unset";
  const TurnSampling t = ParseTurnSampling("8", "4", &warning);
  EXPECT_EQ(t.first, 8u);
  EXPECT_EQ(t.every_shift, 2u);
  EXPECT_EQ(warning, nullptr);
  const TurnSampling defaults = ParseTurnSampling(nullptr, "", &warning);
  EXPECT_EQ(defaults.first, TurnSampling{}.first);
  EXPECT_EQ(defaults.every_shift, TurnSampling{}.every_shift);
  EXPECT_EQ(warning, nullptr);
}

TEST(RuntimeTest, ABadTurnSamplingSettingKeepsItsDefaultAndIsNamed) {
  const char* warning = nullptr;
  TurnSampling t = ParseTurnSampling("many", "4", &warning);
  EXPECT_EQ(t.first, TurnSampling{}.first);
  EXPECT_EQ(t.every_shift, 2u);
  EXPECT_TRUE(Names(warning, "TCPADVISE_TURNS_FIRST") && !Names(warning, "TCPADVISE_TURNS_EVERY")) << warning;
  t = ParseTurnSampling("8", "3", &warning);
  EXPECT_EQ(t.first, 8u);
  EXPECT_EQ(t.every_shift, TurnSampling{}.every_shift);
  EXPECT_TRUE(Names(warning, "TCPADVISE_TURNS_EVERY") && !Names(warning, "TCPADVISE_TURNS_FIRST")) << warning;
}

TEST(RuntimeTest, TwoBadTurnSamplingSettingsAreNamedInOneLine) {
  const char* warning = nullptr;
  const TurnSampling t = ParseTurnSampling("-1", "65537", &warning);
  EXPECT_EQ(t.first, TurnSampling{}.first);
  EXPECT_EQ(t.every_shift, TurnSampling{}.every_shift);
  EXPECT_TRUE(Names(warning, "TCPADVISE_TURNS_FIRST must be") && Names(warning, "TCPADVISE_TURNS_EVERY must be"))
      << warning;
  EXPECT_EQ(strchr(warning, '\n'), nullptr);
}

}  // namespace
}  // namespace tcpadvise
