#include "clock.h"

namespace tcpadvise {

static uint64_t ReadClockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + ts.tv_nsec;
}

uint64_t MonotonicNs() { return ReadClockNs(CLOCK_MONOTONIC); }

uint64_t RealtimeNs() { return ReadClockNs(CLOCK_REALTIME); }

void TickRate::Start() {
  start_ns_ = MonotonicNs();
  start_ticks_ = ReadTicks();
}

double TickRate::TicksPerSecond() const {
#if defined(__x86_64__) || defined(__i386__)
  const uint64_t ticks = ReadTicks();
  const uint64_t ns = MonotonicNs();
  if (ns <= start_ns_ + 1000) return 1e9;  // too short to tell; never reached in practice
  return static_cast<double>(ticks - start_ticks_) * 1e9 / static_cast<double>(ns - start_ns_);
#else
  return 1e9;
#endif
}

}  // namespace tcpadvise
