#include "config.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

extern "C" int tcpadvise_load_config(const char* path, tcpadvise::PolicyConfig* config, char* errors,
                                     size_t errors_size);

namespace tcpadvise {
namespace {

struct Loaded {
  int error_count;
  std::string errors;
  PolicyConfig config;
};

Loaded Load(const std::string& yaml) {
  char path[] = "/tmp/tcpadvise-config-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_EQ(write(fd, yaml.data(), yaml.size()), static_cast<ssize_t>(yaml.size()));
  close(fd);
  static Loaded loaded;  // PolicyConfig is large: keep it off the stack
  char errors[4096];
  loaded.error_count = tcpadvise_load_config(path, &loaded.config, errors, sizeof(errors));
  loaded.errors = errors;
  unlink(path);
  return loaded;
}

sockaddr_in Ipv4(const char* addr, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, addr, &a.sin_addr);
  return a;
}

TEST(ConfigTest, ParsesTheDocumentedExample) {
  const Loaded l = Load(R"(version: 1
output:
  dir: /var/tmp/traces
  interval: 2.5
rules:
  - name: redis-clients
    match: {program: "redis-*", role: client, peer: 127.0.0.0/8, peer_port: 6379}
    policy: coalesce
  - match: {role: server, local_port: 8000-8100}
    policy:
      nodelay: true
      coalesce: {max_bytes: 1448, max_delay_us: 300}
      sndbuf: 65536
)");
  ASSERT_EQ(l.error_count, 0) << l.errors;
  EXPECT_STREQ(l.config.output_dir, "/var/tmp/traces");
  EXPECT_DOUBLE_EQ(l.config.output_interval_s, 2.5);
  ASSERT_EQ(l.config.rule_count, 2);
  EXPECT_STREQ(l.config.rules[0].name, "redis-clients");
  EXPECT_TRUE(l.config.rules[0].settings.coalesce);
  EXPECT_EQ(l.config.rules[0].settings.coalesce_delay_us, static_cast<uint32_t>(kDefaultCoalesceDelayUs));
  EXPECT_STREQ(l.config.rules[1].name, "rule 2");
  const PolicySettings& s = l.config.rules[1].settings;
  EXPECT_TRUE(s.nodelay && s.coalesce);
  EXPECT_EQ(s.coalesce_max_bytes, 1448u);
  EXPECT_EQ(s.coalesce_delay_us, 300u);
  EXPECT_EQ(s.sndbuf, 65536);
}

TEST(ConfigTest, ReportsEveryMistakeWithLineAndColumn) {
  const Loaded l = Load(R"(version: 1
rules:
  - match: {role: sever, local_port: 70000, peer: 10.0.0.0/40, colour: red}
    policy: {cork: {max_delay_us: 500000}, coalesce: true}
  - policy: fast
  - match: {}
)");
  EXPECT_EQ(l.error_count, 8) << l.errors;
  EXPECT_NE(l.errors.find("3:19: match.role must be client or server"), std::string::npos) << l.errors;
  EXPECT_NE(l.errors.find("3:38: match.local_port must be a port"), std::string::npos) << l.errors;
  EXPECT_NE(l.errors.find("match.peer must be an address or a prefix"), std::string::npos);
  EXPECT_NE(l.errors.find("unknown key 'colour'"), std::string::npos);
  EXPECT_NE(l.errors.find("cork.max_delay_us must be a whole number from 1 to 100000"), std::string::npos);
  EXPECT_NE(l.errors.find("4:13: cork and coalesce exclude each other"), std::string::npos) << l.errors;
  EXPECT_NE(l.errors.find("5:13: unknown policy 'fast'"), std::string::npos) << l.errors;
  EXPECT_NE(l.errors.find("missing 'policy'"), std::string::npos);
  EXPECT_EQ(l.config.rule_count, 0);  // a config with mistakes is not used at all
}

TEST(ConfigTest, PortsAreWholeNumbersOrRangesAndNothingElse) {
  for (const char* bad : {"80x", "80-", "-80", "8000-80", "65536", "1e3", "80 - 90"}) {
    const Loaded l = Load(std::string("version: 1\nrules:\n  - match: {local_port: \"") + bad +
                          "\"}\n    policy: observe\n");
    EXPECT_EQ(l.error_count, 1) << bad;
  }
  const Loaded ok = Load("version: 1\nrules:\n  - match: {local_port: 8000-8100, peer_port: 0}\n    policy: observe\n");
  ASSERT_EQ(ok.error_count, 0) << ok.errors;
  EXPECT_EQ(ok.config.rules[0].match.local_port.low, 8000);
  EXPECT_EQ(ok.config.rules[0].match.local_port.high, 8100);
}

TEST(ConfigTest, SyntaxErrorsAndMissingFilesAreErrors) {
  EXPECT_EQ(Load("version: 1\nrules: [\n").error_count, 1);
  PolicyConfig config;
  char errors[256];
  EXPECT_EQ(tcpadvise_load_config("/nonexistent/tcpadvise.yaml", &config, errors, sizeof(errors)), 1);
  EXPECT_STREQ(errors, "0:0: cannot read the file\n");
  const Loaded wrong_version = Load("version: 2\nrules: []\n");
  EXPECT_NE(wrong_version.errors.find("1:10: unknown version"), std::string::npos) << wrong_version.errors;
}

TEST(ConfigTest, ConfigNamesItsSchemaOrSaysVersionOne) {
  const Loaded by_uri = Load(std::string("schema: ") + kConfigSchema + "\nrules:\n  - policy: nodelay\n");
  ASSERT_EQ(by_uri.error_count, 0) << by_uri.errors;
  EXPECT_TRUE(by_uri.config.rules[0].settings.nodelay);
  EXPECT_EQ(Load(std::string("schema: ") + kConfigSchema + "\nversion: 1\nrules: []\n").error_count, 0);
  const Loaded other = Load("schema: https://tcpadvise.dev/schemas/config/2\nrules: []\n");
  EXPECT_NE(other.errors.find("1:9: unknown schema; this tcpadvise reads https://tcpadvise.dev/schemas/config/1"),
            std::string::npos)
      << other.errors;
  const Loaded neither = Load("rules: []\n");
  EXPECT_NE(neither.errors.find("missing 'schema: https://tcpadvise.dev/schemas/config/1'"), std::string::npos)
      << neither.errors;
}

TEST(ConfigTest, FirstMatchingRuleWins) {
  const Loaded l = Load(R"(version: 1
rules:
  - match: {program: "redis-*", peer_port: 6379}
    policy: nodelay
  - match: {role: client, peer: "10.1.0.0/16"}
    policy: cork
  - match: {role: server, local_port: 8000-8100}
    policy: coalesce
  - match: {peer: "::1"}
    policy: observe
)");
  ASSERT_EQ(l.error_count, 0) << l.errors;
  const sockaddr_in redis = Ipv4("127.0.0.1", 6379), lan = Ipv4("10.1.2.3", 80), web = Ipv4("192.0.2.1", 50000);
  MatchInput in;
  in.program = "redis-cli";
  in.role = 1;
  in.peer = reinterpret_cast<const sockaddr*>(&redis);
  EXPECT_EQ(MatchRule(l.config, in), 0);
  in.program = "curl";
  EXPECT_EQ(MatchRule(l.config, in), -1);
  in.peer = reinterpret_cast<const sockaddr*>(&lan);
  EXPECT_EQ(MatchRule(l.config, in), 1);
  in.role = 2;
  in.local_port = 8080;
  in.peer = reinterpret_cast<const sockaddr*>(&web);
  EXPECT_EQ(MatchRule(l.config, in), 2);
  in.local_port = 8101;
  EXPECT_EQ(MatchRule(l.config, in), -1);
  sockaddr_in6 loop6{};
  loop6.sin6_family = AF_INET6;
  loop6.sin6_addr = in6addr_loopback;
  in.peer = reinterpret_cast<const sockaddr*>(&loop6);
  EXPECT_EQ(MatchRule(l.config, in), 3);
}

TEST(ConfigTest, Ipv4PrefixesMatchIpv4MappedPeers) {
  PolicyConfig config;
  config.rule_count = 1;
  ASSERT_TRUE(ParsePeerPrefix("192.168.0.0/16", &config.rules[0].match));
  sockaddr_in6 mapped{};
  mapped.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:192.168.7.7", &mapped.sin6_addr);
  MatchInput in;
  in.peer = reinterpret_cast<const sockaddr*>(&mapped);
  EXPECT_EQ(MatchRule(config, in), 0);
  EXPECT_FALSE(ParsePeerPrefix("192.168.0.0/33", &config.rules[0].match));
  EXPECT_FALSE(ParsePeerPrefix("example.com", &config.rules[0].match));
}

// A weight the trace could not hold as a finite number is refused (YAML's
// .inf and .nan read as doubles).
TEST(ConfigTest, ArmWeightsMustBeFinite) {
  for (const char* weight : {".inf", ".nan", "1e999"}) {
    const Loaded l = Load(std::string(R"(version: 1
experiment:
  name: e
  seed: 1
  arms:
    - {name: control, policy: nodelay, weight: 1}
    - {name: b, policy: observe, weight: )") + weight + "}\n");
    EXPECT_EQ(l.error_count, 1) << weight << ": " << l.errors;
    EXPECT_NE(l.errors.find("arm weight must be a positive finite number"), std::string::npos) << l.errors;
  }
}

}  // namespace
}  // namespace tcpadvise
