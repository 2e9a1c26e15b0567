// PrivateAlloc on libc's heap, for the unit tests and benchmarks. Linked into
// an executable, jemalloc's archive would replace the whole process's malloc
// (and clash with the sanitizers'); the shim links private_alloc.cc instead,
// where jemalloc's symbols stay hidden.
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "private_alloc.h"
#include "private_alloc_testing.h"

namespace tcpadvise {

// libc's heap handles its own reentry; the flag is set by tests only.
__thread bool t_in_private_heap = false;

namespace {
// g_allocs_left: allocations that may still succeed; negative: unlimited.
std::atomic<long> g_allocs_left{-1};
}  // namespace

void PrivateAllocFailAfter(long n) { g_allocs_left.store(n); }

void* PrivateAlloc(size_t size) {
  long left = g_allocs_left.load();
  while (left >= 0) {
    if (left == 0) return nullptr;
    if (g_allocs_left.compare_exchange_weak(left, left - 1)) break;
  }
  return calloc(1, size ? size : 1);
}

void* PrivateRealloc(void* p, size_t size) { return realloc(p, size ? size : 1); }

void PrivateFree(void* p) { free(p); }

void* TableStart(size_t slots_bytes) { return PrivateAlloc(slots_bytes); }
void* TableAlloc(size_t size, size_t) { return PrivateAlloc(size); }
void TableFree(void* p) { PrivateFree(p); }

// libc's heap takes care of fork itself.
void PrivateHeapBeforeFork() {}
void PrivateHeapAfterForkInParent() {}
void PrivateHeapAfterForkInChild() {}

}  // namespace tcpadvise
