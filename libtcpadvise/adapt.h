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

// AdaptiveShape is one socket's learnt shape. A policy keeps it packed in
// one word (PackShape), which a write reads and updates with relaxed atomics:
// the steady passive case without the socket's turn (AdaptSteadyPass), the
// rest under it.
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

// PackShape packs a into one word: burst_writes in bits 0-31, streak in
// 32-62 (it never exceeds kMaxAdaptBursts), active in 63.
inline uint64_t PackShape(const AdaptiveShape& a) {
  return uint64_t{a.burst_writes} | uint64_t{a.streak} << 32 | uint64_t{a.active} << 63;
}

inline AdaptiveShape UnpackShape(uint64_t word) {
  AdaptiveShape a;
  a.active = (word >> 63) != 0;
  a.streak = static_cast<uint32_t>(word >> 32) & 0x7fffffffu;
  a.burst_writes = static_cast<uint32_t>(word);
  return a;
}

// kSteadyPassive is the packed shape of a passive socket whose last burst was
// one write and that argues for no switch: {passive, streak 0, 1 write}.
constexpr uint64_t kSteadyPassive = 1;

// AdaptSteadyPass tells whether AdaptWrite, for a burst's first write on the
// packed shape `word`, is sure to answer kPass with no switch and to leave
// kSteadyPassive, whatever the thresholds: a passive socket with no streak
// whose previous burst had at most one write (0: the socket's first write).
// One comparison, so that the write path can take it before anything else
// (policy.h: PassesUnheld); every other shape takes AdaptWrite.
inline bool AdaptSteadyPass(uint64_t word) { return word <= kSteadyPassive; }

}  // namespace tcpadvise

#endif  // TCPADVISE_ADAPT_H_
