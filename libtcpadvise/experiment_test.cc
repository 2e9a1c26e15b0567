#include "experiment.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <string.h>

namespace tcpadvise {
namespace {

sockaddr_storage Address(const char* text, uint16_t port) {
  sockaddr_storage a{};
  if (strchr(text, ':') != nullptr) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    inet_pton(AF_INET6, text, &in6->sin6_addr);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&a);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    inet_pton(AF_INET, text, &in->sin_addr);
  }
  return a;
}

ExperimentConfig Arms(uint64_t seed, std::initializer_list<double> weights) {
  ExperimentConfig e;
  e.enabled = true;
  e.seed = seed;
  for (double w : weights) e.arms[e.arm_count++].weight = w;
  return e;
}

// The draws advisor/tcpadvise/ab/experiment.py's drawn_arm computes for the same
// connections (8 equal arms): the report recomputes every row's draw.
TEST(ExperimentTest, DrawsMatchTheReportsDefinition) {
  struct Case {
    uint64_t seed;
    const char* local;
    uint16_t local_port;
    const char* peer;
    uint16_t peer_port;
    int arm;
  } cases[] = {
      {42, "127.0.0.1", 40000, "127.0.0.1", 6379, 1},   {42, "127.0.0.1", 6379, "127.0.0.1", 40000, 1},
      {42, "127.0.0.1", 40001, "127.0.0.1", 6379, 3},   {7, "10.0.0.1", 5555, "192.168.1.9", 80, 0},
      {7, "::1", 40000, "::1", 8080, 7},                {99, "2001:db8::5", 1234, "fe80::1", 443, 6},
      {99, "::ffff:127.0.0.1", 5000, "::ffff:127.0.0.1", 80, 6}, {0, "0.0.0.0", 0, "0.0.0.0", 0, 2},
  };
  for (const Case& c : cases) {
    const ExperimentConfig e = Arms(c.seed, {1, 1, 1, 1, 1, 1, 1, 1});
    EXPECT_EQ(ArmDrawnFor(e, Address(c.local, c.local_port), Address(c.peer, c.peer_port)), c.arm)
        << c.local << ":" << c.local_port << " " << c.peer << ":" << c.peer_port;
  }
}

TEST(ExperimentTest, BothEndsOfAConnectionDrawAlike) {
  const ExperimentConfig e = Arms(5, {1, 1, 1, 1});
  for (uint16_t port = 30000; port < 30100; ++port) {
    EXPECT_EQ(ArmDrawnFor(e, Address("10.1.2.3", port), Address("10.9.9.9", 443)),
              ArmDrawnFor(e, Address("10.9.9.9", 443), Address("10.1.2.3", port)));
  }
}

// Connections that differ only in their ephemeral port (one per process)
// split by weight, and another seed draws them afresh.
TEST(ExperimentTest, EphemeralPortsSplitByWeight) {
  const ExperimentConfig a = Arms(11, {1, 3}), b = Arms(12, {1, 3});
  int second = 0, differ = 0;
  constexpr int kConnections = 20000;
  for (int i = 0; i < kConnections; ++i) {
    const uint16_t port = static_cast<uint16_t>(32768 + i);
    const int arm = ArmDrawnFor(a, Address("127.0.0.1", port), Address("127.0.0.1", 6379));
    second += arm;
    differ += arm != ArmDrawnFor(b, Address("127.0.0.1", port), Address("127.0.0.1", 6379));
  }
  EXPECT_NEAR(second / static_cast<double>(kConnections), 0.75, 0.015);  // about 5 standard deviations
  EXPECT_NEAR(differ / static_cast<double>(kConnections), 2 * 0.25 * 0.75, 0.02);
}

}  // namespace
}  // namespace tcpadvise
