#include "experiment.h"

#include <stdio.h>
#include <string.h>

#include "json_writer.h"
#include "private_alloc.h"

namespace tcpadvise {
namespace {

// ConnectionOutcome is what one connection did, kept for the A/B report.
struct ConnectionOutcome {
  uint8_t arm;
  uint64_t turns;
  double turn_p50_ns;
  double turn_mean_ns;
  uint64_t bytes;
  uint64_t duration_ns;
  uint64_t calls;
  uint64_t errors;
  uint64_t data_segs_out;
};

// kMaxOutcomes bounds the per-connection log (about 5 MiB); later
// connections still count in the per-arm totals.
constexpr uint32_t kMaxOutcomes = 65536;

struct ArmTotals {
  uint64_t connections = 0;
  uint64_t calls = 0;
  uint64_t errors = 0;
  TicksHistogram turns;
  bool stopped = false;
  char stop_reason[200] = "";
};

uint64_t g_draws = 0;
ArmTotals g_arms[kMaxArms];
ConnectionOutcome* g_outcomes = nullptr;
uint32_t g_outcome_count = 0;
uint64_t g_outcomes_dropped = 0;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// CheckGuardrail stops arm when it does worse than control beyond the bounds.
void CheckGuardrail(const ExperimentConfig& e, int arm) {
  const Guardrail& g = e.guardrail;
  ArmTotals& a = g_arms[arm];
  const ArmTotals& control = g_arms[0];
  if (arm == 0 || a.stopped || a.connections < g.min_connections || control.connections < g.min_connections) return;
  const double arm_rate = a.calls ? static_cast<double>(a.errors) / static_cast<double>(a.calls) : 0;
  const double control_rate = control.calls ? static_cast<double>(control.errors) / static_cast<double>(control.calls) : 0;
  const double arm_p99 = static_cast<double>(a.turns.Percentile(0.99));
  const double control_p99 = static_cast<double>(control.turns.Percentile(0.99));
  if (g.max_error_rate_increase >= 0 && arm_rate - control_rate > g.max_error_rate_increase) {
    snprintf(a.stop_reason, sizeof(a.stop_reason), "error rate %.4f against control's %.4f (bound +%.4f)", arm_rate,
             control_rate, g.max_error_rate_increase);
  } else if (g.max_p99_ratio >= 1 && control_p99 > 0 && arm_p99 > control_p99 * g.max_p99_ratio) {
    snprintf(a.stop_reason, sizeof(a.stop_reason), "turn p99 %.2fx control's (bound %.2fx)", arm_p99 / control_p99,
             g.max_p99_ratio);
  } else {
    return;
  }
  a.stopped = true;
}

}  // namespace

int DrawArm(const ExperimentConfig& e) {
  double total = 0;
  for (int i = 0; i < e.arm_count; ++i) total += e.arms[i].weight;
  // 53 random bits: a uniform double in [0, 1).
  const double u = static_cast<double>(SplitMix64(e.seed + g_draws++) >> 11) * 0x1.0p-53 * total;
  double cumulative = 0;
  int arm = e.arm_count - 1;
  for (int i = 0; i < e.arm_count; ++i) {
    cumulative += e.arms[i].weight;
    if (u < cumulative) {
      arm = i;
      break;
    }
  }
  return g_arms[arm].stopped ? 0 : arm;
}

int ArmOfRule(const ExperimentConfig& e, int rule) {
  for (int i = 0; i < e.arm_count; ++i) {
    if (e.arms[i].rule == rule) return i;
  }
  return -1;
}

void OnExperimentConnectionClosed(const ExperimentConfig& e, int arm, const SocketState& s, uint64_t now_ticks,
                                  double ns_per_tick) {
  const SocketStats& st = s.stats;
  const uint64_t calls = st.write_calls.Get() + st.read_calls.Get();
  const uint64_t errors = st.errors.Total();
  ArmTotals& a = g_arms[arm];
  ++a.connections;
  a.calls += calls;
  a.errors += errors;
  a.turns.MergeFrom(st.turn_ticks);
  if (g_outcomes == nullptr) g_outcomes = static_cast<ConnectionOutcome*>(PrivateAlloc(sizeof(ConnectionOutcome) * kMaxOutcomes));
  if (g_outcomes == nullptr || g_outcome_count >= kMaxOutcomes) {
    ++g_outcomes_dropped;
  } else {
    const HistogramSummary turns = st.turn_ticks.Summary();
    ConnectionOutcome& o = g_outcomes[g_outcome_count++];
    o.arm = static_cast<uint8_t>(arm);
    o.turns = turns.count;
    o.turn_p50_ns = static_cast<double>(st.turn_ticks.Percentile(0.5)) * ns_per_tick;
    o.turn_mean_ns = turns.count ? static_cast<double>(turns.sum) / static_cast<double>(turns.count) * ns_per_tick : 0;
    o.bytes = st.write_bytes.Get() + st.read_bytes.Get();
    o.duration_ns = static_cast<uint64_t>(static_cast<double>(now_ticks - s.opened_ticks) * ns_per_tick);
    o.calls = calls;
    o.errors = errors;
    o.data_segs_out = s.tcp_info.data_segs_out;
  }
  for (int i = 1; i < e.arm_count; ++i) CheckGuardrail(e, i);
}

void EmitExperiment(JsonWriter* w, const ExperimentConfig& e, double ns_per_tick) {
  w->Key("experiment");
  w->BeginObject();
  w->Key("name");
  w->String(e.name);
  w->Key("seed");
  w->Uint(e.seed);
  w->Key("draws");
  w->Uint(g_draws);
  w->Key("arms");
  w->BeginArray();
  for (int i = 0; i < e.arm_count; ++i) {
    const ArmTotals& a = g_arms[i];
    w->BeginObject();
    w->Key("name");
    w->String(e.arms[i].name);
    w->Key("weight");
    w->Double(e.arms[i].weight);
    w->Key("connections");
    w->Uint(a.connections);
    w->Key("calls");
    w->Uint(a.calls);
    w->Key("errors");
    w->Uint(a.errors);
    w->Key("turn_ns");
    w->BeginArray();  // [low, high, count] buckets, as the trace's histograms
    a.turns.ForEachBucket([w, ns_per_tick](int b, uint64_t n) {
      w->BeginArray();
      w->Double(static_cast<double>(HistogramBucketLow(b)) * ns_per_tick);
      w->Double(static_cast<double>(HistogramBucketHigh(b)) * ns_per_tick);
      w->Uint(n);
      w->EndArray();
    });
    w->EndArray();
    w->Key("stopped");
    w->Bool(a.stopped);
    if (a.stopped) {
      w->Key("stop_reason");
      w->String(a.stop_reason);
    }
    w->EndObject();
  }
  w->EndArray();
  w->Key("connection_fields");
  w->BeginArray();
  for (const char* field : {"arm", "turns", "turn_p50_ns", "turn_mean_ns", "bytes", "duration_ns", "calls", "errors",
                            "data_segs_out"}) {
    w->String(field);
  }
  w->EndArray();
  w->Key("connections");
  w->BeginArray();
  for (uint32_t i = 0; i < g_outcome_count; ++i) {
    const ConnectionOutcome& o = g_outcomes[i];
    w->BeginArray();
    w->Uint(o.arm);
    w->Uint(o.turns);
    w->Double(o.turn_p50_ns);
    w->Double(o.turn_mean_ns);
    w->Uint(o.bytes);
    w->Uint(o.duration_ns);
    w->Uint(o.calls);
    w->Uint(o.errors);
    w->Uint(o.data_segs_out);
    w->EndArray();
  }
  w->EndArray();
  w->Key("connections_dropped");
  w->Uint(g_outcomes_dropped);
  w->EndObject();
}

void ResetExperimentInChild() {
  for (ArmTotals& a : g_arms) {
    a.connections = a.calls = a.errors = 0;
    a.turns.Reset();
    a.stopped = false;
    a.stop_reason[0] = '\0';
  }
  g_outcome_count = 0;
  g_outcomes_dropped = 0;
}

}  // namespace tcpadvise
