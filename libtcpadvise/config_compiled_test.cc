#include "config_compiled.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "policy.h"
#include "policy_load.h"

extern "C" int tcpadvise_load_config(const char* path, tcpadvise::PolicyConfig* config, char* errors,
                                     size_t errors_size);

namespace tcpadvise {
namespace {

constexpr char kYaml[] = R"(schema: https://tcpadvise.dev/schemas/config/1
output: {dir: /var/tmp/traces, interval: 5}
rules:
  - name: web
    match: {role: server, local_port: 8000-8100, peer: 10.0.0.0/8}
    policy: {nodelay: true, coalesce: {max_bytes: 1448, leave_bursts: 9}}
experiment:
  name: trial
  seed: 42
  arms:
    - {name: control, policy: observe}
    - {name: treat, weight: 2, policy: cork}
)";

std::string TempFile(const void* data, size_t size) {
  char path[] = "/tmp/tcpadvise-compiled-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_EQ(write(fd, data, size), static_cast<ssize_t>(size));
  close(fd);
  return path;
}

// Parsed is kYaml through the YAML parser, as the shim would read it.
const PolicyConfig& Parsed() {
  static PolicyConfig config;
  static bool done = false;
  if (!done) {
    const std::string path = TempFile(kYaml, sizeof(kYaml) - 1);
    char errors[1024];
    EXPECT_EQ(tcpadvise_load_config(path.c_str(), &config, errors, sizeof(errors)), 0) << errors;
    unlink(path.c_str());
    done = true;
  }
  return config;
}

std::vector<unsigned char> Compiled(const PolicyConfig& config) {
  std::vector<unsigned char> bytes(kMaxCompiledConfigSize);
  bytes.resize(EncodeCompiledConfig(config, bytes.data()));
  return bytes;
}

// Decode decodes bytes into a fresh PolicyConfig; nullptr or the problem.
const char* Decode(const std::vector<unsigned char>& bytes, size_t size) {
  static PolicyConfig out;
  out = PolicyConfig{};
  return DecodeCompiledConfig(bytes.data(), size, &out);
}
const char* Decode(const std::vector<unsigned char>& bytes) { return Decode(bytes, bytes.size()); }

TEST(CompiledConfigTest, RoundTripsEveryField) {
  const std::vector<unsigned char> bytes = Compiled(Parsed());
  ASSERT_TRUE(IsCompiledConfig(bytes.data(), bytes.size()));
  // Only the rules in use are stored: three rules, not the 72 a config can hold.
  EXPECT_LT(bytes.size(), kMaxCompiledConfigSize / 5);
  static PolicyConfig decoded;
  ASSERT_EQ(DecodeCompiledConfig(bytes.data(), bytes.size(), &decoded), nullptr);
  EXPECT_EQ(memcmp(&decoded, &Parsed(), sizeof(PolicyConfig)), 0);
  EXPECT_EQ(decoded.rule_count, 3);  // the rule and the experiment's two arms
  EXPECT_STREQ(decoded.rules[0].name, "web");
  EXPECT_EQ(decoded.rules[0].settings.coalesce_max_bytes, 1448u);
  EXPECT_EQ(decoded.rules[0].settings.adapt_leave_bursts, 9u);
  EXPECT_EQ(decoded.rules[0].match.local_port.high, 8100);
  EXPECT_STREQ(decoded.experiment.name, "trial");
  EXPECT_EQ(decoded.experiment.arms[1].weight, 2);
  EXPECT_STREQ(decoded.output_dir, "/var/tmp/traces");
  EXPECT_EQ(decoded.output_interval_s, 5);
}

TEST(CompiledConfigTest, YamlIsNotACompiledConfig) {
  EXPECT_FALSE(IsCompiledConfig(kYaml, sizeof(kYaml) - 1));
  EXPECT_FALSE(IsCompiledConfig("TCPA", 4));
}

TEST(CompiledConfigTest, RefusesDamagedFiles) {
  std::vector<unsigned char> bytes = Compiled(Parsed());
  constexpr char kWrongSize[] = "its size is wrong: cut short, or compiled by another tcpadvise build";
  EXPECT_STREQ(Decode(bytes, bytes.size() - 1), kWrongSize);
  EXPECT_STREQ(Decode(bytes, sizeof(CompiledConfigHeader)), kWrongSize);
  bytes[sizeof(CompiledConfigHeader) + 100] ^= 1;
  EXPECT_STREQ(Decode(bytes), "its checksum is wrong: the file is damaged");
  bytes = Compiled(Parsed());
  bytes[offsetof(CompiledConfigHeader, layout)] ^= 1;
  EXPECT_STREQ(Decode(bytes), "compiled by another tcpadvise build");
  bytes = Compiled(Parsed());
  bytes[sizeof(CompiledConfigHeader) + offsetof(PolicyConfig, rule_count) + 3] = 0x40;  // a rule count past 2**30
  EXPECT_STREQ(Decode(bytes), "rule count out of range");
}

// Damage a checksum cannot see (the bytes were written so): every index and
// flag is still checked before a hook could use it.
TEST(CompiledConfigTest, RefusesOutOfRangeFieldsEvenWithAGoodChecksum) {
  static PolicyConfig bad;
  bad = Parsed();
  bad.experiment.arms[1].rule = 50;
  EXPECT_STREQ(Decode(Compiled(bad)), "an experiment arm is damaged");
  bad = Parsed();
  const unsigned char two = 2;
  memcpy(&bad.rules[0].settings.cork, &two, 1);
  EXPECT_STREQ(Decode(Compiled(bad)), "a rule is damaged");
  bad = Parsed();
  bad.rules[0].match.peer_prefix_bits = 33;  // an IPv4 prefix
  EXPECT_STREQ(Decode(Compiled(bad)), "a rule is damaged");
  bad = Parsed();
  memset(bad.output_dir, 'x', sizeof(bad.output_dir));
  EXPECT_STREQ(Decode(Compiled(bad)), "the output settings are damaged");
}

// The shim's loader takes a compiled config without libtcpadvise_config.so
// (this test binary has none beside it), and a damaged one fails open.
TEST(CompiledConfigTest, TheShimLoadsACompiledConfigWithoutTheYamlLibrary) {
  const std::vector<unsigned char> bytes = Compiled(Parsed());
  const std::string path = TempFile(bytes.data(), bytes.size());
  LoadPolicyConfig(path.c_str());
  ASSERT_NE(g_policy_config, nullptr);
  EXPECT_FALSE(g_config_problem);
  EXPECT_STREQ(g_policy_config->rules[0].name, "web");
  unlink(path.c_str());

  const std::string cut = TempFile(bytes.data(), bytes.size() / 2);
  g_policy_config = nullptr;
  LoadPolicyConfig(cut.c_str());
  EXPECT_EQ(g_policy_config, nullptr);
  EXPECT_TRUE(g_config_problem);
  unlink(cut.c_str());
}

}  // namespace
}  // namespace tcpadvise
