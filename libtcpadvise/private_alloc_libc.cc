// PrivateAlloc on libc's heap, for the unit tests and benchmarks. Linked into
// an executable, jemalloc's archive would replace the whole process's malloc
// (and clash with the sanitizers'); the shim links private_alloc.cc instead,
// where jemalloc's symbols stay hidden.
#include <stdlib.h>
#include <string.h>

#include "private_alloc.h"

namespace tcpadvise {

// libc's heap handles its own reentry; the flag is set by tests only.
__thread bool t_in_private_heap = false;

void* PrivateAlloc(size_t size) { return calloc(1, size ? size : 1); }

void* PrivateRealloc(void* p, size_t size) { return realloc(p, size ? size : 1); }

void PrivateFree(void* p) { free(p); }

}  // namespace tcpadvise
