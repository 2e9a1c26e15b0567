// Config: the policy rules of docs/policy-config.md as plain data. The YAML
// is parsed by config_yaml.cc, built into libtcpadvise_config.so, which the
// shim loads only when TCPADVISE_CONFIG is set (yaml-cpp needs libstdc++ and
// exceptions, which the shim itself does without); the result crosses that
// boundary as this plain struct.
#ifndef TCPADVISE_CONFIG_H_
#define TCPADVISE_CONFIG_H_

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

namespace tcpadvise {

// kConfigSchema is the URI a config names in its schema field (the JSON
// Schema advisor/tcpadvise/schemas/config-1.schema.json); `version: 1`, what
// configs said before, means the same.
constexpr char kConfigSchema[] = "https://tcpadvise.dev/schemas/config/1";

// kMaxRules bounds a config; kMaxNameLength bounds names and globs.
constexpr int kMaxRules = 64;
constexpr int kMaxNameLength = 128;
constexpr int kDefaultCorkDelayUs = 5000;
constexpr int kMaxCorkDelayUs = 100000;
constexpr int kDefaultCoalesceDelayUs = 200;
// kDefaultAdaptEnterBursts and kDefaultAdaptLeaveBursts are the adaptive
// rule's hysteresis (adapt.h): multi-write bursts in a row before a socket
// turns active, single-write bursts in a row before it turns passive.
constexpr int kDefaultAdaptEnterBursts = 1;
constexpr int kDefaultAdaptLeaveBursts = 4;
constexpr int kMaxAdaptBursts = 1000;

// PolicySettings is what a rule applies to its sockets.
struct PolicySettings {
  bool nodelay = false;
  bool quickack = false;
  bool cork = false;
  uint32_t cork_delay_us = kDefaultCorkDelayUs;
  bool coalesce = false;
  uint32_t coalesce_max_bytes = 0;  // 0: one MSS of the socket
  uint32_t coalesce_delay_us = kDefaultCoalesceDelayUs;
  int32_t sndbuf = 0;  // 0: leave alone
  int32_t rcvbuf = 0;
  // adaptive: cork and coalesce act on a socket only while its bursts have
  // more than one write (adapt.h); false: on every write, as before.
  bool adaptive = true;
  uint32_t adapt_enter_bursts = kDefaultAdaptEnterBursts;
  uint32_t adapt_leave_bursts = kDefaultAdaptLeaveBursts;
};

// PortRange matches ports in [low, high]; an unset range matches all.
struct PortRange {
  bool set = false;
  uint16_t low = 0;
  uint16_t high = 0;
};

// PolicyMatch holds the conditions of one rule; unset ones match anything.
struct PolicyMatch {
  char program[kMaxNameLength] = "";  // fnmatch glob; empty: any
  uint8_t role = 0;                   // 0 any, 1 client, 2 server
  PortRange local_port;
  PortRange peer_port;
  bool peer_set = false;
  sa_family_t peer_family = 0;
  uint8_t peer_prefix_bits = 0;
  unsigned char peer_addr[16] = {};
};

// PolicyRule is one entry of the ordered rule list.
struct PolicyRule {
  char name[kMaxNameLength] = "";
  PolicyMatch match;
  PolicySettings settings;
  // Set for the rules that stand for an experiment's arms: they are chosen
  // by the experiment's draw, never by matching.
  bool experiment_arm = false;
};

// kMaxArms bounds an experiment.
constexpr int kMaxArms = 8;

// ExperimentArm is one policy under test; the first arm is the control.
struct ExperimentArm {
  char name[kMaxNameLength] = "";
  double weight = 1;
  int rule = -1;  // the rule (in PolicyConfig::rules) that carries its policy
};

// Guardrail bounds how much worse than control an arm may do before it stops
// receiving new connections; a negative bound is not checked.
struct Guardrail {
  double max_error_rate_increase = -1;  // errors per call, arm minus control
  double max_p99_ratio = -1;            // turn p99, arm over control
  uint32_t min_connections = 20;        // in each of the two, before judging
};

// ExperimentConfig splits the matching connections between arms at random.
struct ExperimentConfig {
  bool enabled = false;
  char name[kMaxNameLength] = "";
  uint64_t seed = 0;
  PolicyMatch match;
  int arm_count = 0;
  ExperimentArm arms[kMaxArms];
  Guardrail guardrail;
};

// PolicyConfig is a whole parsed file.
struct PolicyConfig {
  int rule_count = 0;
  PolicyRule rules[kMaxRules + kMaxArms];
  ExperimentConfig experiment;
  char output_dir[1024] = "";  // empty: not given
  double output_interval_s = -1;  // negative: not given
};

// MatchInput describes a socket at the moment its policy is chosen.
struct MatchInput {
  const char* program = "";
  uint8_t role = 0;  // 1 client, 2 server
  uint16_t local_port = 0;
  const sockaddr* peer = nullptr;  // IPv4 or IPv6
};

// Matches tells whether one rule's (or an experiment's) conditions hold.
bool Matches(const PolicyMatch& match, const MatchInput& socket);

// MatchRule returns the index of the first rule matching the socket, or -1;
// experiment arms are never matched.
int MatchRule(const PolicyConfig& config, const MatchInput& socket);

// ParsePeerPrefix reads "addr" or "addr/bits" (IPv4 or IPv6) into match;
// false when it is neither.
bool ParsePeerPrefix(const char* text, PolicyMatch* match);

// SetBuiltinPolicy fills settings for observe, nodelay, cork or coalesce;
// false for any other name.
bool SetBuiltinPolicy(const char* name, PolicySettings* settings);

// The C entry point of libtcpadvise_config.so: parses the file at path into
// *config; returns the number of errors, each written to errors as one line
// "LINE:COLUMN: message" (1-based), truncated to errors_size.
extern "C" typedef int (*LoadConfigFn)(const char* path, PolicyConfig* config, char* errors, size_t errors_size);
constexpr const char kLoadConfigSymbol[] = "tcpadvise_load_config";

}  // namespace tcpadvise

#endif  // TCPADVISE_CONFIG_H_
