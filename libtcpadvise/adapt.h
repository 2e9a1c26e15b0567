// Adapt: the per-socket decision rule of the adaptive cork and coalesce
// policies (docs/policy-config.md, "Adaptive policies"). A socket's bursts
// (its writes between two reads) decide whether a policy acts on it: a
// socket that answers each request with one write gains nothing from a cork
// or from holding, so its writes pass straight through, with no extra
// syscall and no holding.
//
// The rule: a socket starts passive. While passive, a burst's first write
// passes through and the policy acts from the burst's second write on (the
// socket is writing in pieces now). After enter_bursts multi-write bursts in
// a row the socket turns active: the policy acts from each burst's first
// write, so that first write is held or corked with the rest (default 1:
// a passive socket's multi-write burst still meets Nagle's delayed ACK). After
// leave_bursts single-write bursts in a row it turns passive again. The two
// thresholds are the hysteresis: a socket alternating shapes does not flip
// at every burst.
#ifndef TCPADVISE_ADAPT_H_
#define TCPADVISE_ADAPT_H_

#include <stdint.h>

namespace tcpadvise {

// AdaptiveShape is one socket's learnt shape; plain data, guarded by the
// socket's turn. Whether it is steady (AdaptSteady) is published apart, for
// the writes that pass without the turn (policy.h: PassesUnheld).
struct AdaptiveShape {
  bool active = false;
  uint32_t streak = 0;  // bursts in a row that argue for switching
  uint32_t burst_writes = 0;  // writes of the open burst the policy saw
};

// AdaptDecision is what the rule says about one write.
enum class AdaptDecision : uint8_t {
  kPass,  // a passive socket's first write of a burst: straight through
  kAct,   // hold or cork it
};

// AdaptEndBurst feeds a closed burst of `writes` writes to the rule; returns
// true when the socket switched (either way).
inline bool AdaptEndBurst(AdaptiveShape* a, uint32_t writes, uint32_t enter_bursts, uint32_t leave_bursts) {
  if (writes == 0) return false;
  const bool argues = a->active ? writes == 1 : writes > 1;
  if (!argues) {
    a->streak = 0;
    return false;
  }
  if (++a->streak < (a->active ? leave_bursts : enter_bursts)) return false;
  a->active = !a->active;
  a->streak = 0;
  return true;
}

// AdaptWrite tells what to do with a write; burst_start: it is the first
// write since the socket last read (the previous burst, if any, is closed).
inline AdaptDecision AdaptWrite(AdaptiveShape* a, bool burst_start, uint32_t enter_bursts, uint32_t leave_bursts,
                                bool* switched) {
  *switched = false;
  if (burst_start) {
    *switched = AdaptEndBurst(a, a->burst_writes, enter_bursts, leave_bursts);
    a->burst_writes = 0;
  }
  ++a->burst_writes;
  return a->active || a->burst_writes > 1 ? AdaptDecision::kAct : AdaptDecision::kPass;
}

// AdaptSteady tells whether a is a steady passive shape: passive, no streak,
// its last burst one write. AdaptWrite leaves it as it is for a burst's
// first write, which it passes, whatever the thresholds: a burst's first
// write on it can pass without AdaptWrite, and without changing the shape.
inline bool AdaptSteady(const AdaptiveShape& a) { return !a.active && a.streak == 0 && a.burst_writes == 1; }

}  // namespace tcpadvise

#endif  // TCPADVISE_ADAPT_H_
