#include "config_compiled.h"

#include <math.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

namespace tcpadvise {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

constexpr uint64_t Mix(uint64_t hash, uint64_t value) { return (hash ^ value) * kFnvPrime; }

// kLayout fingerprints PolicyConfig: the sizes of its parts and where the
// fields sit, so that a config compiled by a build that lays them out
// differently is refused rather than misread.
constexpr uint64_t kLayout = [] {
  const uint64_t parts[] = {
      sizeof(PolicyConfig),  sizeof(PolicyRule),  sizeof(PolicySettings), sizeof(PolicyMatch),
      sizeof(PortRange),     sizeof(ExperimentConfig), sizeof(ExperimentArm), sizeof(Guardrail),
      offsetof(PolicyConfig, rules), offsetof(PolicyConfig, experiment), offsetof(PolicyConfig, output_dir),
      offsetof(PolicyConfig, output_interval_s), offsetof(PolicyRule, match), offsetof(PolicyRule, settings),
      offsetof(PolicyRule, experiment_arm), offsetof(PolicySettings, cork_delay_us),
      offsetof(PolicySettings, coalesce_max_bytes), offsetof(PolicySettings, coalesce_delay_us),
      offsetof(PolicySettings, sndbuf), offsetof(PolicySettings, rcvbuf), offsetof(PolicySettings, adaptive),
      offsetof(PolicySettings, adapt_enter_bursts), offsetof(PolicySettings, adapt_leave_bursts),
      offsetof(PolicyMatch, role), offsetof(PolicyMatch, local_port), offsetof(PolicyMatch, peer_port),
      offsetof(PolicyMatch, peer_family), offsetof(PolicyMatch, peer_addr), offsetof(ExperimentConfig, seed),
      offsetof(ExperimentConfig, arms), offsetof(ExperimentConfig, guardrail), offsetof(ExperimentArm, weight),
      offsetof(ExperimentArm, rule), offsetof(Guardrail, min_connections), kMaxRules, kMaxArms, kMaxNameLength,
  };
  uint64_t hash = kFnvOffset;
  for (const uint64_t part : parts) hash = Mix(hash, part);
  return hash;
}();

uint64_t Checksum(const unsigned char* bytes, size_t size) {
  uint64_t hash = kFnvOffset;
  for (size_t i = 0; i < size; ++i) hash = Mix(hash, bytes[i]);
  return hash;
}

// RulesEnd is where the rules in use end in a PolicyConfig's bytes; the
// bytes from kTailStart on (experiment, output) follow them in the file.
constexpr size_t kTailStart = offsetof(PolicyConfig, experiment);
constexpr size_t kTailSize = sizeof(PolicyConfig) - kTailStart;
constexpr size_t RulesEnd(int rule_count) {
  return offsetof(PolicyConfig, rules) + static_cast<size_t>(rule_count) * sizeof(PolicyRule);
}

// Checker validates a decoded config. A bool's byte is looked at before the
// bool is read (a bool holding another value than 0 or 1 is undefined
// behaviour to read).
class Checker {
 public:
  explicit Checker(const PolicyConfig& config) : config_(config) {}

  // Checker::Check returns nullptr or what is damaged; rule_count is known
  // to be in range (DecodeCompiledConfig sized the file by it).
  const char* Check() const {
    for (int i = 0; i < config_.rule_count; ++i) {
      const PolicyRule& rule = config_.rules[i];
      if (!Terminated(rule.name) || !Bool(rule.experiment_arm) || !ValidMatch(rule.match) ||
          !ValidSettings(rule.settings)) {
        return "a rule is damaged";
      }
    }
    const ExperimentConfig& e = config_.experiment;
    if (!Bool(e.enabled) || !Terminated(e.name) || !ValidMatch(e.match) || e.arm_count < 0 || e.arm_count > kMaxArms ||
        (e.enabled && e.arm_count < 2) || !isfinite(e.guardrail.max_error_rate_increase) ||
        !isfinite(e.guardrail.max_p99_ratio)) {
      return "the experiment is damaged";
    }
    for (int i = 0; i < e.arm_count; ++i) {
      const ExperimentArm& arm = e.arms[i];
      if (!Terminated(arm.name) || !(arm.weight > 0) || !isfinite(arm.weight) || arm.rule < 0 ||
          arm.rule >= config_.rule_count || !config_.rules[arm.rule].experiment_arm) {
        return "an experiment arm is damaged";
      }
    }
    if (!Terminated(config_.output_dir) || !isfinite(config_.output_interval_s)) return "the output settings are damaged";
    return nullptr;
  }

 private:
  static bool Bool(const bool& field) {
    unsigned char byte;
    memcpy(&byte, &field, 1);
    return byte <= 1;
  }

  template <size_t N>
  static bool Terminated(const char (&text)[N]) {
    return memchr(text, '\0', N) != nullptr;
  }

  static bool ValidPorts(const PortRange& range) { return Bool(range.set) && range.low <= range.high; }

  static bool ValidMatch(const PolicyMatch& match) {
    if (!Terminated(match.program) || match.role > 2 || !ValidPorts(match.local_port) ||
        !ValidPorts(match.peer_port) || !Bool(match.peer_set)) {
      return false;
    }
    if (match.peer_family == AF_INET) return match.peer_prefix_bits <= 32;
    if (match.peer_family == AF_INET6) return match.peer_prefix_bits <= 128;
    return match.peer_family == 0;
  }

  static bool ValidSettings(const PolicySettings& s) {
    return Bool(s.nodelay) && Bool(s.quickack) && Bool(s.cork) && Bool(s.coalesce) && Bool(s.adaptive) &&
           s.cork_delay_us <= kMaxCorkDelayUs && s.coalesce_delay_us <= kMaxCorkDelayUs &&
           s.coalesce_max_bytes <= (1u << 20) && s.sndbuf >= 0 && s.rcvbuf >= 0 && s.adapt_enter_bursts >= 1 &&
           s.adapt_enter_bursts <= kMaxAdaptBursts && s.adapt_leave_bursts >= 1 &&
           s.adapt_leave_bursts <= kMaxAdaptBursts;
  }

  const PolicyConfig& config_;
};

}  // namespace

bool IsCompiledConfig(const void* data, size_t size) {
  return size >= sizeof(kCompiledConfigMagic) && memcmp(data, kCompiledConfigMagic, sizeof(kCompiledConfigMagic)) == 0;
}

size_t EncodeCompiledConfig(const PolicyConfig& config, unsigned char* out) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&config);
  unsigned char* payload = out + sizeof(CompiledConfigHeader);
  const size_t rules_end = RulesEnd(config.rule_count);
  memcpy(payload, bytes, rules_end);
  memcpy(payload + rules_end, bytes + kTailStart, kTailSize);
  CompiledConfigHeader header;
  memcpy(header.magic, kCompiledConfigMagic, sizeof(header.magic));
  header.layout = kLayout;
  header.checksum = Checksum(payload, rules_end + kTailSize);
  memcpy(out, &header, sizeof(header));
  return sizeof(header) + rules_end + kTailSize;
}

const char* DecodeCompiledConfig(const void* data, size_t size, PolicyConfig* config) {
  constexpr const char* kWrongSize = "its size is wrong: cut short, or compiled by another tcpadvise build";
  if (!IsCompiledConfig(data, size)) return "not a compiled tcpadvise config";
  CompiledConfigHeader header;
  int rule_count;
  if (size < sizeof(header) + sizeof(rule_count)) return kWrongSize;
  memcpy(&header, data, sizeof(header));
  if (header.layout != kLayout) return "compiled by another tcpadvise build";
  const unsigned char* payload = static_cast<const unsigned char*>(data) + sizeof(header);
  memcpy(&rule_count, payload + offsetof(PolicyConfig, rule_count), sizeof(rule_count));
  if (rule_count < 0 || rule_count > kMaxRules + kMaxArms) return "rule count out of range";
  const size_t rules_end = RulesEnd(rule_count);
  if (size != sizeof(header) + rules_end + kTailSize) return kWrongSize;
  if (Checksum(payload, rules_end + kTailSize) != header.checksum) return "its checksum is wrong: the file is damaged";
  unsigned char* bytes = reinterpret_cast<unsigned char*>(config);
  memcpy(bytes, payload, rules_end);
  memcpy(bytes + kTailStart, payload + rules_end, kTailSize);
  return Checker(*config).Check();
}

}  // namespace tcpadvise
