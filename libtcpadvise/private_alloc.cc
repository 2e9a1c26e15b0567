#include "private_alloc.h"

#include <jemalloc/jemalloc.h>

#include "reentry.h"

namespace tcpadvise {

// Each call is a ShimSection: jemalloc may hold an arena lock inside it.

void* PrivateAlloc(size_t size) {
  ShimSection section;
  return mallocx(size ? size : 1, MALLOCX_ZERO);
}

void* PrivateRealloc(void* p, size_t size) {
  if (p == nullptr) return PrivateAlloc(size);
  ShimSection section;
  return rallocx(p, size ? size : 1, 0);
}

void PrivateFree(void* p) {
  ShimSection section;
  if (p != nullptr) dallocx(p, 0);
}

}  // namespace tcpadvise
