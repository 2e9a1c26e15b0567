// UserMemory: reading the application's buffers without trusting them. A
// bad pointer handed to write() gets EFAULT from the kernel; the shim, which
// copies held bytes itself, must not crash instead. A range is copied only
// once the kernel confirmed it readable (process_vm_readv on the process
// itself, which fails with EFAULT rather than faulting); confirmed pages are
// remembered per thread, so a program that writes from the same buffers
// pays for that once, until it unmaps memory or makes it unreadable (munmap,
// mremap and mprotect are wrapped and forget every confirmation).
#ifndef TCPADVISE_USER_MEMORY_H_
#define TCPADVISE_USER_MEMORY_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <atomic>

namespace tcpadvise {

// A confirmed page range [lo, hi), valid while generation is current.
struct ReadableRange {
  uintptr_t lo = 0, hi = 0;
  uint64_t generation = 0;
};

// g_memory_generation moves on whenever the application changes its
// mappings; t_last_readable is this thread's last confirmed range.
extern std::atomic<uint64_t> g_memory_generation;
extern __thread ReadableRange t_last_readable;

// CopyFromAppSlow is CopyFromApp's path for a range not confirmed last.
bool CopyFromAppSlow(void* dst, const void* src, size_t n);

// CopyFromApp copies n bytes at src to dst; false, with nothing copied that
// can be relied on, when some of src is not readable. Keeps errno.
inline bool CopyFromApp(void* dst, const void* src, size_t n) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(src);
  const ReadableRange& r = t_last_readable;
  if (__builtin_expect(r.generation == g_memory_generation.load(std::memory_order_acquire) && lo >= r.lo &&
                           n <= r.hi - lo && lo < r.hi, 1)) {
    memcpy(dst, src, n);
    return true;
  }
  return CopyFromAppSlow(dst, src, n);
}

// ForgetReadableMemory drops every confirmation: the application changed
// its mappings.
void ForgetReadableMemory();

}  // namespace tcpadvise

#endif  // TCPADVISE_USER_MEMORY_H_
