#include "private_alloc.h"

#include <jemalloc/jemalloc.h>

namespace tcpadvise {

void* PrivateAlloc(size_t size) { return mallocx(size ? size : 1, MALLOCX_ZERO); }

void* PrivateRealloc(void* p, size_t size) {
  if (p == nullptr) return PrivateAlloc(size);
  return rallocx(p, size ? size : 1, 0);
}

void PrivateFree(void* p) {
  if (p != nullptr) dallocx(p, 0);
}

}  // namespace tcpadvise
