#include "private_alloc.h"

#include <jemalloc/jemalloc.h>

#include "reentry.h"

namespace tcpadvise {

__thread bool t_in_private_heap = false;

namespace {

// HeapSection marks a call into jemalloc, which may hold an arena lock
// inside it: a ShimSection, and t_in_private_heap.
class HeapSection {
 public:
  HeapSection() { t_in_private_heap = true; }
  ~HeapSection() { t_in_private_heap = false; }
  HeapSection(const HeapSection&) = delete;
  HeapSection& operator=(const HeapSection&) = delete;

 private:
  ShimSection section_;
};

}  // namespace

void* PrivateAlloc(size_t size) {
  HeapSection section;
  return mallocx(size ? size : 1, MALLOCX_ZERO);
}

void* PrivateRealloc(void* p, size_t size) {
  if (p == nullptr) return PrivateAlloc(size);
  HeapSection section;
  return rallocx(p, size ? size : 1, 0);
}

void PrivateFree(void* p) {
  HeapSection section;
  if (p != nullptr) dallocx(p, 0);
}

}  // namespace tcpadvise
