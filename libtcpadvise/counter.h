// Counter: a statistic updated on the hot path without a lock or a locked
// read-modify-write. Each socket is normally written by one thread at a
// time; loads and stores are relaxed atomics, so that concurrent readers (the
// snapshot thread) and checkers (ThreadSanitizer) stay correct. An add is one
// instruction (x86-64): a signal handler that writes to the socket its thread
// was writing to interrupts it before or after, never between a load and a
// store, so neither add is lost. Two threads writing the same socket at the
// same instant may still lose one; a locked add on every write would make
// every program pay for that rare one.
#ifndef TCPADVISE_COUNTER_H_
#define TCPADVISE_COUNTER_H_

#include <stdint.h>

namespace tcpadvise {

// Counter is a relaxed 64-bit statistic.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  uint64_t Get() const { return __atomic_load_n(&value_, __ATOMIC_RELAXED); }
  void Set(uint64_t v) { __atomic_store_n(&value_, v, __ATOMIC_RELAXED); }
  void Add(uint64_t delta) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
    asm volatile("addq %1, %0" : "+m"(value_) : "er"(delta));
#else
    __atomic_fetch_add(&value_, delta, __ATOMIC_RELAXED);
#endif
  }
  void Increment() { Add(1); }
  // Counter::AddFetch adds and returns the sum, in one instruction too.
  uint64_t AddFetch(uint64_t delta) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
    uint64_t old = delta;
    asm volatile("xaddq %0, %1" : "+r"(old), "+m"(value_));
    return old + delta;
#else
    return __atomic_add_fetch(&value_, delta, __ATOMIC_RELAXED);
#endif
  }

 private:
  uint64_t value_ = 0;
};

}  // namespace tcpadvise

#endif  // TCPADVISE_COUNTER_H_
