// Counter: a statistic updated on the hot path without a lock or an atomic
// read-modify-write. Each socket is normally written by one thread at a time;
// relaxed loads and stores keep concurrent readers (the snapshot thread) and
// checkers (ThreadSanitizer) correct at the price of possibly losing an update
// when two threads write the same socket at the same instant.
#ifndef TCPADVISE_COUNTER_H_
#define TCPADVISE_COUNTER_H_

#include <stdint.h>

#include <atomic>

namespace tcpadvise {

// Counter is a relaxed 64-bit statistic.
class Counter {
 public:
  uint64_t Get() const { return value_.load(std::memory_order_relaxed); }
  void Set(uint64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(uint64_t delta) { Set(Get() + delta); }
  void Increment() { Add(1); }

 private:
  std::atomic<uint64_t> value_{0};
};

}  // namespace tcpadvise

#endif  // TCPADVISE_COUNTER_H_
