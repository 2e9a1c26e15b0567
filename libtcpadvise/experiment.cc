#include "experiment.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "address.h"
#include "clock.h"
#include "json_writer.h"
#include "private_alloc.h"
#include "runtime.h"
#include "socket_table.h"

namespace tcpadvise {
namespace {

// Endpoint is one end of a connection, compact: family 4 or 6 (0 unknown),
// the address in network order, the port in host order.
struct Endpoint {
  uint8_t family = 0;
  uint16_t port = 0;
  uint8_t addr[16] = {};
};

// ConnectionOutcome is what one connection did, kept for the A/B report;
// a live connection's is what it did so far.
struct ConnectionOutcome {
  uint8_t arm;
  uint8_t drawn;  // the arm drawn; differs from arm when the guardrail sent it to control
  bool live;
  uint64_t turns;
  double turn_p50_ns;
  double turn_mean_ns;
  double sent_to_reply_mean_ns;
  uint64_t bytes;
  uint64_t duration_ns;
  uint64_t calls;
  uint64_t errors;
  uint64_t data_segs_out;
  Endpoint local;
  Endpoint peer;
};

// kMaxOutcomes bounds the per-connection log (about 7 MiB, grown as
// needed); later connections still count in the per-arm totals.
constexpr uint32_t kMaxOutcomes = 65536;

struct ArmTotals {
  uint64_t connections = 0;
  uint64_t live = 0;
  uint64_t drawn = 0;  // connections that drew this arm, wherever they went
  uint64_t calls = 0;
  uint64_t errors = 0;
  TicksHistogram turns;

  void Add(const ArmTotals& o) {
    connections += o.connections;
    live += o.live;
    drawn += o.drawn;
    calls += o.calls;
    errors += o.errors;
    turns.MergeFrom(o.turns);
  }
  void Reset() {
    connections = live = drawn = calls = errors = 0;
    turns.Reset();
  }
};

struct ArmStop {
  bool stopped = false;
  char reason[200] = "";
};

uint64_t g_draws = 0;
ArmTotals g_closed[kMaxArms];  // closed connections
ArmTotals g_view[kMaxArms];    // closed plus live, as of the last Tally
ArmStop g_stops[kMaxArms];
uint64_t g_last_live_check = 0;  // ticks
ConnectionOutcome* g_outcomes = nullptr;
uint32_t g_outcome_capacity = 0;
uint32_t g_outcome_count = 0;
uint64_t g_outcomes_dropped = 0;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Endpoint EndpointOf(const SocketAddress& a) {
  Endpoint e;
  if (a.ss_family == AF_INET) {
    e.family = 4;
    memcpy(e.addr, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, 4);
  } else if (a.ss_family == AF_INET6) {
    e.family = 6;
    memcpy(e.addr, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, 16);
  }
  e.port = PortOf(a);
  return e;
}

// Words are an endpoint's hash input: the address as big-endian 64-bit
// words (one for IPv4, two for IPv6), then the port.
int Words(const Endpoint& e, uint64_t out[3]) {
  const int bytes = e.family == 4 ? 4 : e.family == 6 ? 16 : 0;
  int n = 0;
  for (int at = 0; at < bytes; at += 8, ++n) {
    out[n] = 0;
    for (int i = at; i < at + 8 && i < bytes; ++i) out[n] = out[n] << 8 | e.addr[i];
  }
  out[n++] = e.port;
  return n;
}

uint64_t ConnectionHash(uint64_t seed, const Endpoint& local, const Endpoint& peer) {
  uint64_t a[3], b[3];
  const int na = Words(local, a), nb = Words(peer, b);
  bool swap = false;  // canonical order: the lower endpoint first
  for (int i = 0; i < na && i < nb; ++i) {
    if (a[i] != b[i]) {
      swap = b[i] < a[i];
      break;
    }
  }
  uint64_t h = SplitMix64(seed ^ local.family);
  const uint64_t* first = swap ? b : a;
  const uint64_t* second = swap ? a : b;
  for (int i = 0; i < (swap ? nb : na); ++i) h = SplitMix64(h ^ first[i]);
  for (int i = 0; i < (swap ? na : nb); ++i) h = SplitMix64(h ^ second[i]);
  return h;
}

int ArmOfHash(const ExperimentConfig& e, uint64_t h) {
  double total = 0;
  for (int i = 0; i < e.arm_count; ++i) total += e.arms[i].weight;
  // 53 random bits: a uniform double in [0, 1).
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53 * total;
  double cumulative = 0;
  for (int i = 0; i < e.arm_count; ++i) {
    cumulative += e.arms[i].weight;
    if (u < cumulative) return i;
  }
  return e.arm_count - 1;
}

// ErrorCount counts a socket's failed calls; EAGAIN, EWOULDBLOCK and EINTR
// are how non-blocking and interrupted calls work, not failures.
uint64_t ErrorCount(const SocketStats& st) {
  static_assert(EAGAIN == EWOULDBLOCK, "one slot counts both");
  return st.errors.Total() - st.errors.Get(EAGAIN) - st.errors.Get(EINTR);
}

ConnectionOutcome OutcomeOf(const ExperimentConfig& e, int arm, const SocketState& s, bool live, uint64_t now_ticks,
                            double ns_per_tick) {
  const SocketStats& st = s.stats;
  const HistogramSummary turns = st.turn_ticks.Summary();
  const HistogramSummary sent = st.sent_to_reply_ticks.SummaryOver(st.SentToReplyBuckets());
  ConnectionOutcome o;
  o.arm = static_cast<uint8_t>(arm);
  o.local = EndpointOf(s.id.local);
  o.peer = EndpointOf(s.id.peer);
  o.drawn = static_cast<uint8_t>(ArmOfHash(e, ConnectionHash(e.seed, o.local, o.peer)));
  o.live = live;
  o.turns = st.Turns();  // exact; the histogram's count is an estimate once sampling started
  o.turn_p50_ns = static_cast<double>(st.turn_ticks.Percentile(0.5)) * ns_per_tick;
  o.turn_mean_ns = turns.count ? static_cast<double>(turns.sum) / static_cast<double>(turns.count) * ns_per_tick : 0;
  o.sent_to_reply_mean_ns = sent.count ? static_cast<double>(sent.sum) / static_cast<double>(sent.count) * ns_per_tick : 0;
  o.bytes = st.write_bytes.Get() + st.read_bytes.Get();
  o.duration_ns = static_cast<uint64_t>(static_cast<double>(now_ticks - s.opened_ticks) * ns_per_tick);
  o.calls = st.write_calls.Get() + st.read_calls.Get();
  o.errors = ErrorCount(st);
  o.data_segs_out = s.tcp_info.data_segs_out;
  return o;
}

void AddOutcome(ArmTotals* totals, const ConnectionOutcome& o, const SocketStats& st) {
  ArmTotals& a = totals[o.arm];
  ++a.connections;
  if (o.live) ++a.live;
  ++totals[o.drawn].drawn;
  a.calls += o.calls;
  a.errors += o.errors;
  a.turns.MergeFrom(st.turn_ticks);
}

// TakesPart tells whether a table entry is a live connection of the
// experiment: a connection of an arm that this process used (a fork parent's
// copy of a connection its child serves is not one); sets *arm.
bool TakesPart(const ExperimentConfig& e, const SocketState& s, int* arm) {
  if (s.id.rule < 0 || !s.stats.Active()) return false;
  *arm = ArmOfRule(e, s.id.rule);
  return *arm >= 0;
}

// Tally sets g_view to the closed connections' totals plus the live ones'.
void Tally(const ExperimentConfig& e, uint64_t now_ticks, double ns_per_tick) {
  for (int i = 0; i < e.arm_count; ++i) {
    g_view[i].Reset();
    g_view[i].Add(g_closed[i]);
  }
  g_table.ForEachLive([&](int, SocketState* s) {
    int arm;
    if (TakesPart(e, *s, &arm)) AddOutcome(g_view, OutcomeOf(e, arm, *s, true, now_ticks, ns_per_tick), s->stats);
  });
}

// CheckGuardrail stops arm when, in totals, it does worse than control
// beyond the bounds.
void CheckGuardrail(const ExperimentConfig& e, const ArmTotals* totals, int arm) {
  const Guardrail& g = e.guardrail;
  const ArmTotals& a = totals[arm];
  const ArmTotals& control = totals[0];
  ArmStop& stop = g_stops[arm];
  if (arm == 0 || stop.stopped || a.connections < g.min_connections || control.connections < g.min_connections) return;
  const double arm_rate = a.calls ? static_cast<double>(a.errors) / static_cast<double>(a.calls) : 0;
  const double control_rate = control.calls ? static_cast<double>(control.errors) / static_cast<double>(control.calls) : 0;
  const double arm_p99 = static_cast<double>(a.turns.Percentile(0.99));
  const double control_p99 = static_cast<double>(control.turns.Percentile(0.99));
  if (g.max_error_rate_increase >= 0 && arm_rate - control_rate > g.max_error_rate_increase) {
    snprintf(stop.reason, sizeof(stop.reason), "error rate %.4f against control's %.4f (bound +%.4f) over %llu connections",
             arm_rate, control_rate, g.max_error_rate_increase, static_cast<unsigned long long>(a.connections));
  } else if (g.max_p99_ratio >= 1 && control_p99 > 0 && arm_p99 > control_p99 * g.max_p99_ratio) {
    snprintf(stop.reason, sizeof(stop.reason), "turn p99 %.2fx control's (bound %.2fx) over %llu connections (%llu live)",
             arm_p99 / control_p99, g.max_p99_ratio, static_cast<unsigned long long>(a.connections),
             static_cast<unsigned long long>(a.live));
  } else {
    return;
  }
  stop.stopped = true;
}

void CheckAll(const ExperimentConfig& e, const ArmTotals* totals) {
  for (int i = 1; i < e.arm_count; ++i) CheckGuardrail(e, totals, i);
}

void EmitEndpointFields(JsonWriter* w, const Endpoint& e) {
  char text[INET6_ADDRSTRLEN] = "";
  if (e.family != 0) inet_ntop(e.family == 4 ? AF_INET : AF_INET6, e.addr, text, sizeof(text));
  w->String(text);
  w->Uint(e.port);
}

void EmitRow(JsonWriter* w, const ConnectionOutcome& o) {
  w->BeginArray();
  w->Uint(o.arm);
  w->Uint(o.drawn);
  w->Bool(o.live);
  w->Uint(o.turns);
  w->Double(o.turn_p50_ns);
  w->Double(o.turn_mean_ns);
  w->Double(o.sent_to_reply_mean_ns);
  w->Uint(o.bytes);
  w->Uint(o.duration_ns);
  w->Uint(o.calls);
  w->Uint(o.errors);
  w->Uint(o.data_segs_out);
  EmitEndpointFields(w, o.local);
  EmitEndpointFields(w, o.peer);
  w->EndArray();
}

bool GrowOutcomes() {
  if (g_outcome_capacity >= kMaxOutcomes) return false;
  const uint32_t capacity = g_outcome_capacity == 0 ? 1024 : g_outcome_capacity * 2;
  void* grown = PrivateRealloc(g_outcomes, sizeof(ConnectionOutcome) * capacity);
  if (grown == nullptr) return false;
  g_outcomes = static_cast<ConnectionOutcome*>(grown);
  g_outcome_capacity = capacity;
  return true;
}

}  // namespace

int ArmDrawnFor(const ExperimentConfig& e, const SocketAddress& local, const SocketAddress& peer) {
  return ArmOfHash(e, ConnectionHash(e.seed, EndpointOf(local), EndpointOf(peer)));
}

int DrawArm(const ExperimentConfig& e, const SocketAddress& local, const SocketAddress& peer) {
  ++g_draws;
  const uint64_t now = ReadTicks();
  const double ticks_per_second = g_runtime.tick_rate.TicksPerSecond();
  if (e.guardrail.max_p99_ratio >= 1 || e.guardrail.max_error_rate_increase >= 0) {
    if (now - g_last_live_check >= static_cast<uint64_t>(ticks_per_second)) {
      g_last_live_check = now;
      Tally(e, now, 1e9 / ticks_per_second);
      CheckAll(e, g_view);
    }
  }
  const int arm = ArmDrawnFor(e, local, peer);
  return g_stops[arm].stopped ? 0 : arm;
}

int ArmOfRule(const ExperimentConfig& e, int rule) {
  for (int i = 0; i < e.arm_count; ++i) {
    if (e.arms[i].rule == rule) return i;
  }
  return -1;
}

void OnExperimentConnectionClosed(const ExperimentConfig& e, int arm, const SocketState& s, uint64_t now_ticks,
                                  double ns_per_tick) {
  const ConnectionOutcome o = OutcomeOf(e, arm, s, false, now_ticks, ns_per_tick);
  AddOutcome(g_closed, o, s.stats);
  if (g_outcome_count < g_outcome_capacity || GrowOutcomes()) {
    g_outcomes[g_outcome_count++] = o;
  } else {
    ++g_outcomes_dropped;
  }
  CheckAll(e, g_closed);
}

void EmitExperiment(JsonWriter* w, const ExperimentConfig& e, double ns_per_tick) {
  const uint64_t now = ReadTicks();
  Tally(e, now, ns_per_tick);
  CheckAll(e, g_view);
  w->Key("experiment");
  w->BeginObject();
  w->Key("name");
  w->String(e.name);
  w->Key("seed");
  w->Uint(e.seed);
  w->Key("assignment");
  w->String(kAssignment);
  w->Key("draws");
  w->Uint(g_draws);
  w->Key("arms");
  w->BeginArray();
  for (int i = 0; i < e.arm_count; ++i) {
    const ArmTotals& a = g_view[i];
    w->BeginObject();
    w->Key("name");
    w->String(e.arms[i].name);
    w->Key("weight");
    w->Double(e.arms[i].weight);
    w->Key("connections");
    w->Uint(a.connections);
    w->Key("live_connections");
    w->Uint(a.live);
    w->Key("drawn");
    w->Uint(a.drawn);
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
    w->Bool(g_stops[i].stopped);
    if (g_stops[i].stopped) {
      w->Key("stop_reason");
      w->String(g_stops[i].reason);
    }
    w->EndObject();
  }
  w->EndArray();
  w->Key("connection_fields");
  w->BeginArray();
  for (const char* field : {"arm", "drawn", "live", "turns", "turn_p50_ns", "turn_mean_ns", "sent_to_reply_mean_ns",
                            "bytes", "duration_ns", "calls", "errors", "data_segs_out", "local_addr", "local_port",
                            "peer_addr", "peer_port"}) {
    w->String(field);
  }
  w->EndArray();
  w->Key("connections");
  w->BeginArray();
  for (uint32_t i = 0; i < g_outcome_count; ++i) EmitRow(w, g_outcomes[i]);
  g_table.ForEachLive([&](int, SocketState* s) {
    int arm;
    if (TakesPart(e, *s, &arm)) EmitRow(w, OutcomeOf(e, arm, *s, true, now, ns_per_tick));
  });
  w->EndArray();
  w->Key("connections_dropped");
  w->Uint(g_outcomes_dropped);
  w->EndObject();
}

void ResetExperimentInChild() {
  // No draw, no experiment state: the child need not copy its pages.
  if (g_draws == 0) return;
  for (int i = 0; i < kMaxArms; ++i) {
    g_closed[i].Reset();
    g_stops[i] = ArmStop();
  }
  g_draws = 0;
  g_outcome_count = 0;
  g_outcomes_dropped = 0;
}

}  // namespace tcpadvise
