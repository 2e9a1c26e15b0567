#include "runtime.h"

#include <gtest/gtest.h>

#include <stdio.h>
#include <string.h>

#include <string>

#include "process_page.h"

namespace tcpadvise {
namespace {

bool Names(const char* warning, const char* setting) { return warning != nullptr && strstr(warning, setting) != nullptr; }

// HandOff runs OnSocketClosing on a server connection this process
// accepted (used: it read from it; forked: a fork came after the accept) and
// tells whether the process then hands its connections off.
bool HandOff(bool used, bool forked, Role role = Role::kServer, bool inherited = false) {
  g_process_page.hands_off_connections = false;
  g_process_page.forks = 7;
  OnConnectionTracked(/*accepted=*/true);
  if (forked) ++g_process_page.forks;
  SocketState s;
  s.id.role = role;
  s.owner = inherited ? ProcessToken() + 1 : ProcessToken();
  if (used) s.stats.read_calls.Increment();
  OnSocketClosing(s);
  const bool handed_off = g_process_page.hands_off_connections;
  g_process_page.hands_off_connections = false;
  return handed_off;
}

TEST(RuntimeTest, AConnectionClosedUnusedAfterAForkIsHandedOff) {
  EXPECT_TRUE(HandOff(/*used=*/false, /*forked=*/true));
}

TEST(RuntimeTest, AConnectionUsedKeptOrNotAcceptedHereIsNotHandedOff) {
  EXPECT_FALSE(HandOff(/*used=*/true, /*forked=*/true));  // redis closing a client during BGSAVE
  EXPECT_FALSE(HandOff(/*used=*/false, /*forked=*/false));  // a server refusing a connection
  EXPECT_FALSE(HandOff(/*used=*/false, /*forked=*/true, Role::kListener));  // a fork child closing its listener
  EXPECT_FALSE(HandOff(/*used=*/false, /*forked=*/true, Role::kServer, /*inherited=*/true));
}

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

TEST(RuntimeTest, ChildTraceSamplingIsReadAndABadSettingIsNamed) {
  const char* warning = nullptr;
  ChildTraceSampling c = ParseChildTraceSampling("0", "1", &warning);
  EXPECT_EQ(c.first, 0u);
  EXPECT_EQ(c.every_shift, 0u);  // every child writes
  EXPECT_EQ(warning, nullptr);
  c = ParseChildTraceSampling(nullptr, nullptr, &warning);
  EXPECT_EQ(c.first, 16u);
  EXPECT_EQ(c.every_shift, 4u);
  EXPECT_EQ(warning, nullptr);
  c = ParseChildTraceSampling("some", "12", &warning);
  EXPECT_EQ(c.first, 16u);
  EXPECT_EQ(c.every_shift, 4u);
  EXPECT_TRUE(Names(warning, "TCPADVISE_CHILD_TRACES_FIRST must be") &&
              Names(warning, "TCPADVISE_CHILD_TRACES_EVERY must be a power of two"))
      << warning;
  EXPECT_TRUE(Names(warning, "using 16; TCPADVISE")) << warning;
}

// Using is the end of the warning of a bad setting whose default is `value`.
std::string Using(double value) {
  char text[64];
  snprintf(text, sizeof(text), "; using %g", value);
  return text;
}

bool EndsWith(const char* warning, const std::string& end) {
  const size_t length = warning == nullptr ? 0 : strlen(warning);
  return length >= end.size() && memcmp(warning + length - end.size(), end.data(), end.size()) == 0;
}

TEST(RuntimeTest, TurnSamplingWarningsNameTheDefaults) {
  const char* warning = nullptr;
  ParseTurnSampling("many", nullptr, &warning);
  EXPECT_TRUE(EndsWith(warning, Using(static_cast<double>(TurnSampling{}.first)))) << warning;
  ParseTurnSampling(nullptr, "3", &warning);
  EXPECT_TRUE(EndsWith(warning, Using(static_cast<double>(uint64_t{1} << TurnSampling{}.every_shift)))) << warning;
}

TEST(RuntimeTest, SettingsReadGoodValuesWithoutAWarning) {
  const char* warning = "unset";
  Settings s = ParseSettings("/tmp/traces", "0.5", &warning);
  EXPECT_STREQ(s.out_dir, "/tmp/traces");
  EXPECT_EQ(s.interval_s, 0.5);
  EXPECT_EQ(warning, nullptr);
  s = ParseSettings(nullptr, "", &warning);
  EXPECT_STREQ(s.out_dir, Settings{}.out_dir);
  EXPECT_EQ(s.interval_s, Settings{}.interval_s);
  EXPECT_EQ(warning, nullptr);
}

TEST(RuntimeTest, ABadSettingKeepsItsDefaultAndIsNamed) {
  const std::string too_long(sizeof(Settings{}.out_dir), 'd');
  const char* warning = nullptr;
  Settings s = ParseSettings(too_long.c_str(), "2", &warning);
  EXPECT_STREQ(s.out_dir, Settings{}.out_dir);
  EXPECT_EQ(s.interval_s, 2.0);
  EXPECT_TRUE(Names(warning, "TCPADVISE_OUT") && !Names(warning, "TCPADVISE_INTERVAL")) << warning;
  for (const char* bad : {"soon", "-1", "86401", "nan", "5s"}) {
    s = ParseSettings("/tmp/traces", bad, &warning);
    EXPECT_STREQ(s.out_dir, "/tmp/traces");
    EXPECT_EQ(s.interval_s, Settings{}.interval_s) << bad;
    EXPECT_TRUE(Names(warning, "TCPADVISE_INTERVAL") && !Names(warning, "TCPADVISE_OUT")) << bad << ": " << warning;
    EXPECT_TRUE(EndsWith(warning, Using(Settings{}.interval_s))) << warning;
  }
}

TEST(RuntimeTest, TwoBadSettingsAreNamedInOneLine) {
  const std::string too_long(sizeof(Settings{}.out_dir), 'd');
  const char* warning = nullptr;
  const Settings s = ParseSettings(too_long.c_str(), "soon", &warning);
  EXPECT_STREQ(s.out_dir, Settings{}.out_dir);
  EXPECT_EQ(s.interval_s, Settings{}.interval_s);
  EXPECT_TRUE(Names(warning, "TCPADVISE_OUT is too long") && Names(warning, "TCPADVISE_INTERVAL must be")) << warning;
  EXPECT_EQ(strchr(warning, '\n'), nullptr);
}

}  // namespace
}  // namespace tcpadvise
