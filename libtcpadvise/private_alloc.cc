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

// jemalloc's heap profiler is its only user of libm, and it stays off in the
// shim's heap whatever the application's MALLOC_CONF (meant for the
// application's own jemalloc, if any) says: jemalloc reads this setting after
// the environment's. Its exp, log and round are renamed to these
// (libtcpadvise/CMakeLists.txt), never called, so that the shim does not load
// libm into every process.
extern "C" {
const char* malloc_conf_2_conf_harder = "prof:false";
double tcpadvise_jemalloc_exp(double) { __builtin_trap(); }
double tcpadvise_jemalloc_log(double) { __builtin_trap(); }
double tcpadvise_jemalloc_round(double) { __builtin_trap(); }
}
