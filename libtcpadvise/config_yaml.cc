// Parses docs/policy-config.md's YAML with yaml-cpp into a PolicyConfig,
// collecting every mistake with its line and column. Built into
// libtcpadvise_config.so (loaded by the shim on demand) and into
// tcpadvise-config-check; exceptions never leave this file.
#include <stdio.h>
#include <string.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "config.h"

namespace tcpadvise {
namespace {

class Parser {
 public:
  explicit Parser(PolicyConfig* config) : config_(config) {}

  void Parse(const YAML::Node& root) {
    if (!root.IsMap()) return Error(root, "expected a mapping with schema and rules");
    CheckKeys(root, {"schema", "version", "output", "rules", "experiment"});
    ParseSchema(root);
    if (const YAML::Node output = root["output"]) ParseOutput(output);
    const YAML::Node rules = root["rules"];
    const YAML::Node experiment = root["experiment"];
    if (!rules && !experiment) return Error(root, "missing 'rules': a list of {match, policy}");
    if (rules) {
      if (!rules.IsSequence()) return Error(rules, "'rules' must be a list");
      if (rules.size() > static_cast<size_t>(kMaxRules)) {
        return Error(rules, "too many rules (at most " + std::to_string(kMaxRules) + ")");
      }
      for (const YAML::Node& rule : rules) ParseRule(rule, config_->rules[config_->rule_count++]);
    }
    if (experiment) ParseExperiment(experiment);
  }

  // Parser::ParseSchema checks that the config names its schema's URI, or
  // says `version: 1` as configs written before the URI did.
  void ParseSchema(const YAML::Node& root) {
    const YAML::Node schema = root["schema"];
    const YAML::Node version = root["version"];
    if (schema) {
      if (!schema.IsScalar() || schema.Scalar() != kConfigSchema) {
        Error(schema, std::string("unknown schema; this tcpadvise reads ") + kConfigSchema);
      }
    }
    if (version && Int(version, "version") != 1) {
      Error(version, std::string("unknown version; this tcpadvise reads version 1 (schema ") + kConfigSchema + ")");
    }
    if (!schema && !version) Error(root, std::string("missing 'schema: ") + kConfigSchema + "'");
  }

  // Parser::Errors lists the mistakes in the order they stand in the file.
  std::vector<std::string> Errors() {
    std::stable_sort(errors_.begin(), errors_.end(),
                     [](const Found& a, const Found& b) { return a.line != b.line ? a.line < b.line : a.column < b.column; });
    std::vector<std::string> lines;
    for (const Found& f : errors_) lines.push_back(std::to_string(f.line) + ":" + std::to_string(f.column) + ": " + f.message);
    return lines;
  }

  void Error(const YAML::Node& node, const std::string& message) {
    const YAML::Mark mark = node.Mark();
    errors_.push_back({mark.line + 1, mark.column + 1, message});
  }

 private:
  void CheckKeys(const YAML::Node& map, std::initializer_list<const char*> allowed) {
    for (const auto& entry : map) {
      const std::string key = entry.first.Scalar();
      bool known = false;
      std::string expected;
      for (const char* a : allowed) {
        known = known || key == a;
        expected += expected.empty() ? a : std::string(", ") + a;
      }
      if (!known) Error(entry.first, "unknown key '" + key + "' (expected one of: " + expected + ")");
    }
  }

  long long Int(const YAML::Node& node, const char* what, long long low = 0, long long high = INT32_MAX) {
    long long value = 0;
    if (!node.IsScalar() || !YAML::convert<long long>::decode(node, value) || value < low || value > high) {
      Error(node, std::string(what) + " must be a whole number from " + std::to_string(low) + " to " +
                      std::to_string(high));
      return low;
    }
    return value;
  }

  bool Bool(const YAML::Node& node, const char* what) {
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) Error(node, std::string(what) + " must be true or false");
    return value;
  }

  std::string String(const YAML::Node& node, const char* what, size_t max_length) {
    if (!node.IsScalar()) {
      Error(node, std::string(what) + " must be a string");
      return "";
    }
    if (node.Scalar().size() >= max_length) Error(node, std::string(what) + " is too long");
    return node.Scalar().substr(0, max_length - 1);
  }

  void ParseOutput(const YAML::Node& output) {
    if (!output.IsMap()) return Error(output, "'output' must be a mapping with dir and interval");
    CheckKeys(output, {"dir", "interval"});
    if (const YAML::Node dir = output["dir"]) {
      strcpy(config_->output_dir, String(dir, "output.dir", sizeof(config_->output_dir)).c_str());
    }
    if (const YAML::Node interval = output["interval"]) {
      double seconds = -1;
      if (!interval.IsScalar() || !YAML::convert<double>::decode(interval, seconds) || seconds < 0 || seconds > 86400) {
        Error(interval, "output.interval must be a number of seconds from 0 to 86400");
      } else {
        config_->output_interval_s = seconds;
      }
    }
  }

  PortRange Ports(const YAML::Node& node, const char* what) {
    PortRange range;
    const std::string text = node.IsScalar() ? node.Scalar() : "";
    const size_t dash = text.find('-');
    unsigned long low = 0, high = 0;
    if (!ParsePort(text.substr(0, dash), &low) ||
        !ParsePort(dash == std::string::npos ? text : text.substr(dash + 1), &high) || low > high) {
      Error(node, std::string(what) + " must be a port or a range like 8000-8100");
      return range;
    }
    range.set = true;
    range.low = static_cast<uint16_t>(low);
    range.high = static_cast<uint16_t>(high);
    return range;
  }

  // ParsePort reads a whole decimal number from 0 to 65535, nothing around it.
  static bool ParsePort(const std::string& text, unsigned long* port) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 5) return false;
    *port = std::stoul(text);
    return *port <= 65535;
  }

  void ParseMatch(const YAML::Node& match, PolicyMatch& m) {
    if (match.IsNull()) return;
    if (!match.IsMap()) return Error(match, "'match' must be a mapping");
    CheckKeys(match, {"program", "role", "local_port", "peer", "peer_port"});
    if (const YAML::Node program = match["program"]) {
      strcpy(m.program, String(program, "match.program", sizeof(m.program)).c_str());
    }
    if (const YAML::Node role = match["role"]) {
      const std::string r = role.IsScalar() ? role.Scalar() : "";
      if (r == "client") {
        m.role = 1;
      } else if (r == "server") {
        m.role = 2;
      } else {
        Error(role, "match.role must be client or server");
      }
    }
    if (const YAML::Node port = match["local_port"]) m.local_port = Ports(port, "match.local_port");
    if (const YAML::Node port = match["peer_port"]) m.peer_port = Ports(port, "match.peer_port");
    if (const YAML::Node peer = match["peer"]) {
      if (!peer.IsScalar() || !ParsePeerPrefix(peer.Scalar().c_str(), &m)) {
        Error(peer, "match.peer must be an address or a prefix, like 10.0.0.0/8 or ::1");
      }
    }
  }

  void ParsePolicy(const YAML::Node& policy, PolicySettings& s) {
    if (policy.IsScalar()) {
      if (!SetBuiltinPolicy(policy.Scalar().c_str(), &s)) {
        Error(policy, "unknown policy '" + policy.Scalar() + "' (built-in: observe, nodelay, cork, coalesce)");
      }
      return;
    }
    if (!policy.IsMap()) return Error(policy, "'policy' must be a built-in name or a mapping of settings");
    CheckKeys(policy, {"nodelay", "quickack", "cork", "coalesce", "sndbuf", "rcvbuf"});
    if (const YAML::Node v = policy["nodelay"]) s.nodelay = Bool(v, "nodelay");
    if (const YAML::Node v = policy["quickack"]) s.quickack = Bool(v, "quickack");
    if (const YAML::Node v = policy["sndbuf"]) s.sndbuf = static_cast<int32_t>(Int(v, "sndbuf", 1));
    if (const YAML::Node v = policy["rcvbuf"]) s.rcvbuf = static_cast<int32_t>(Int(v, "rcvbuf", 1));
    if (const YAML::Node cork = policy["cork"]) {
      s.cork = SubPolicy(cork, "cork", {"max_delay_us", "adaptive", "enter_bursts", "leave_bursts"});
      if (const YAML::Node v = Setting(cork, "max_delay_us")) {
        s.cork_delay_us = static_cast<uint32_t>(Int(v, "cork.max_delay_us", 1, kMaxCorkDelayUs));
      }
      ParseAdaptive(cork, "cork", s);
    }
    if (const YAML::Node coalesce = policy["coalesce"]) {
      s.coalesce = SubPolicy(coalesce, "coalesce",
                             {"max_bytes", "max_delay_us", "adaptive", "enter_bursts", "leave_bursts"});
      ParseAdaptive(coalesce, "coalesce", s);
      if (const YAML::Node v = Setting(coalesce, "max_bytes")) {
        s.coalesce_max_bytes = static_cast<uint32_t>(Int(v, "coalesce.max_bytes", 1, 1 << 20));
      }
      if (const YAML::Node v = Setting(coalesce, "max_delay_us")) {
        s.coalesce_delay_us = static_cast<uint32_t>(Int(v, "coalesce.max_delay_us", 1, kMaxCorkDelayUs));
      }
    }
    if (s.cork && s.coalesce) Error(policy, "cork and coalesce exclude each other: choose one");
  }

  // ParseAdaptive reads a cork or coalesce mapping's adaptive rule settings.
  void ParseAdaptive(const YAML::Node& sub_policy, const std::string& what, PolicySettings& s) {
    if (const YAML::Node v = Setting(sub_policy, "adaptive")) s.adaptive = Bool(v, (what + ".adaptive").c_str());
    if (const YAML::Node v = Setting(sub_policy, "enter_bursts")) {
      s.adapt_enter_bursts = static_cast<uint32_t>(Int(v, (what + ".enter_bursts").c_str(), 1, kMaxAdaptBursts));
    }
    if (const YAML::Node v = Setting(sub_policy, "leave_bursts")) {
      s.adapt_leave_bursts = static_cast<uint32_t>(Int(v, (what + ".leave_bursts").c_str(), 1, kMaxAdaptBursts));
    }
  }

  // Setting returns policy[key] of a sub-policy mapping; an invalid node
  // (false) when the sub-policy is not a mapping or lacks the key.
  static YAML::Node Setting(const YAML::Node& sub_policy, const char* key) {
    return sub_policy.IsMap() ? sub_policy[key] : YAML::Node(YAML::NodeType::Undefined);
  }

  // SubPolicy reads `cork: true`, `cork: {}` or `cork: {settings}`.
  bool SubPolicy(const YAML::Node& node, const char* what, std::initializer_list<const char*> keys) {
    if (node.IsMap()) {
      CheckKeys(node, keys);
      return true;
    }
    if (node.IsNull()) return true;
    return Bool(node, what);
  }

  void ParseExperiment(const YAML::Node& node) {
    ExperimentConfig& e = config_->experiment;
    if (!node.IsMap()) return Error(node, "'experiment' must be a mapping with name, seed, match and arms");
    CheckKeys(node, {"name", "seed", "match", "arms", "guardrail"});
    e.enabled = true;
    if (const YAML::Node name = node["name"]) {
      strcpy(e.name, String(name, "experiment.name", sizeof(e.name)).c_str());
    } else {
      Error(node, "missing experiment 'name'");
    }
    if (const YAML::Node seed = node["seed"]) {
      e.seed = static_cast<uint64_t>(Int(seed, "experiment.seed", 0, INT64_MAX));
    } else {
      Error(node, "missing experiment 'seed' (a whole number: the key that, with a connection's 4-tuple, fixes its arm)");
    }
    if (const YAML::Node match = node["match"]) ParseMatch(match, e.match);
    const YAML::Node arms = node["arms"];
    if (!arms || !arms.IsSequence() || arms.size() < 2 || arms.size() > static_cast<size_t>(kMaxArms)) {
      return Error(arms ? arms : node, "experiment 'arms' must be a list of 2 to " + std::to_string(kMaxArms) +
                                           " {name, weight, policy}; the first is the control");
    }
    for (const YAML::Node& arm : arms) {
      ExperimentArm& a = e.arms[e.arm_count++];
      if (!arm.IsMap()) {
        Error(arm, "each arm must be a mapping with name, weight and policy");
        continue;
      }
      CheckKeys(arm, {"name", "weight", "policy"});
      if (const YAML::Node name = arm["name"]) {
        strcpy(a.name, String(name, "arm name", sizeof(a.name)).c_str());
      } else {
        Error(arm, "missing arm 'name'");
      }
      for (int i = 0; i + 1 < e.arm_count; ++i) {
        if (strcmp(e.arms[i].name, a.name) == 0) Error(arm, std::string("two arms are named '") + a.name + "'");
      }
      if (const YAML::Node weight = arm["weight"]) {
        if (!weight.IsScalar() || !YAML::convert<double>::decode(weight, a.weight) || !(a.weight > 0) ||
            !std::isfinite(a.weight)) {
          Error(weight, "arm weight must be a positive finite number");
        }
      }
      a.rule = config_->rule_count++;
      PolicyRule& rule = config_->rules[a.rule];
      rule.experiment_arm = true;
      // "experiment/arm", cut to fit: names are labels, not keys.
      const std::string label = std::string(e.name) + "/" + a.name;
      strcpy(rule.name, label.substr(0, sizeof(rule.name) - 1).c_str());
      const YAML::Node policy = arm["policy"];
      if (!policy) {
        Error(arm, "missing arm 'policy'");
      } else {
        ParsePolicy(policy, rule.settings);
      }
    }
    if (const YAML::Node guard = node["guardrail"]) {
      if (!guard.IsMap()) return Error(guard, "'guardrail' must be a mapping");
      CheckKeys(guard, {"max_error_rate_increase", "max_p99_ratio", "min_connections"});
      Guardrail& g = e.guardrail;
      if (const YAML::Node v = guard["max_error_rate_increase"]) g.max_error_rate_increase = Fraction(v, "max_error_rate_increase");
      if (const YAML::Node v = guard["max_p99_ratio"]) {
        if (!v.IsScalar() || !YAML::convert<double>::decode(v, g.max_p99_ratio) || !(g.max_p99_ratio >= 1)) {
          Error(v, "guardrail.max_p99_ratio must be a number of at least 1");
        }
      }
      if (const YAML::Node v = guard["min_connections"]) {
        g.min_connections = static_cast<uint32_t>(Int(v, "guardrail.min_connections", 1, 1000000));
      }
    }
  }

  double Fraction(const YAML::Node& node, const char* what) {
    double value = -1;
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || value < 0 || value > 1) {
      Error(node, std::string("guardrail.") + what + " must be a number from 0 to 1");
      return -1;
    }
    return value;
  }

  void ParseRule(const YAML::Node& rule, PolicyRule& r) {
    if (!rule.IsMap()) return Error(rule, "each rule must be a mapping with match and policy");
    CheckKeys(rule, {"name", "match", "policy"});
    if (const YAML::Node name = rule["name"]) {
      strcpy(r.name, String(name, "name", sizeof(r.name)).c_str());
    } else {
      snprintf(r.name, sizeof(r.name), "rule %d", config_->rule_count);
    }
    if (const YAML::Node match = rule["match"]) ParseMatch(match, r.match);
    const YAML::Node policy = rule["policy"];
    if (!policy) return Error(rule, "missing 'policy'");
    ParsePolicy(policy, r.settings);
  }

  struct Found {
    int line;
    int column;
    std::string message;
  };

  PolicyConfig* config_;
  std::vector<Found> errors_;
};

}  // namespace
}  // namespace tcpadvise

extern "C" __attribute__((visibility("default"))) int tcpadvise_load_config(const char* path,
                                                                            tcpadvise::PolicyConfig* config,
                                                                            char* errors, size_t errors_size) {
  using tcpadvise::Parser;
  *config = tcpadvise::PolicyConfig();
  std::vector<std::string> found;
  try {
    Parser parser(config);
    parser.Parse(YAML::LoadFile(path));
    found = parser.Errors();
  } catch (const YAML::BadFile&) {
    found.push_back("0:0: cannot read the file");
  } catch (const YAML::ParserException& e) {
    found.push_back(std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    found.push_back(std::string("0:0: ") + e.what());
  }
  std::string text;
  for (const std::string& line : found) text += line + "\n";
  if (errors_size > 0) {
    const size_t n = text.size() < errors_size - 1 ? text.size() : errors_size - 1;
    memcpy(errors, text.data(), n);
    errors[n] = '\0';
  }
  if (!found.empty()) *config = tcpadvise::PolicyConfig();
  return static_cast<int>(found.size());
}
