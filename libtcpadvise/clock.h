// Clock: the cheapest monotonic tick counter this CPU offers, and the one
// conversion from ticks to nanoseconds, done when a trace is written.
#ifndef TCPADVISE_CLOCK_H_
#define TCPADVISE_CLOCK_H_

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace tcpadvise {

// ReadTicks returns a monotonic tick count: the TSC on x86 (about 9 ns,
// against 21 ns for clock_gettime), CLOCK_MONOTONIC nanoseconds elsewhere.
inline uint64_t ReadTicks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + ts.tv_nsec;
#endif
}

// MonotonicNs returns CLOCK_MONOTONIC in nanoseconds.
uint64_t MonotonicNs();

// RealtimeNs returns CLOCK_REALTIME in nanoseconds since the epoch.
uint64_t RealtimeNs();

// TickRate converts ticks to nanoseconds by comparing the tick counter with
// CLOCK_MONOTONIC over the whole life of the process: no calibration delay at
// start-up, and the longer the process runs the better the estimate.
class TickRate {
 public:
  // TickRate::Start records the reference point.
  void Start();
  // TickRate::TicksPerSecond measures the rate since Start.
  double TicksPerSecond() const;

 private:
  uint64_t start_ticks_ = 0;
  uint64_t start_ns_ = 0;
};

}  // namespace tcpadvise

#endif  // TCPADVISE_CLOCK_H_
