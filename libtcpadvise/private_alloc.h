// PrivateAlloc: the shim's own heap (jemalloc linked in with hidden symbols),
// so the shim never touches the application's malloc, its locks or its
// statistics.
#ifndef TCPADVISE_PRIVATE_ALLOC_H_
#define TCPADVISE_PRIVATE_ALLOC_H_

#include <stddef.h>

#include <new>
#include <utility>

namespace tcpadvise {

// t_in_private_heap is set while this thread is inside the private heap: a
// hook entered then is a signal handler that interrupted it, and must not
// allocate (the heap's locks are not reentrant).
extern __thread bool t_in_private_heap;

// PrivateAlloc returns zeroed memory from the private heap, or nullptr.
void* PrivateAlloc(size_t size);

// PrivateRealloc grows or shrinks a PrivateAlloc block; nullptr on failure
// (the old block stays valid).
void* PrivateRealloc(void* p, size_t size);

// PrivateFree releases a PrivateAlloc block; nullptr is fine.
void PrivateFree(void* p);

// PrivateHeapBeforeFork, PrivateHeapAfterForkInParent and
// PrivateHeapAfterForkInChild bracket a fork (the runtime's fork handlers
// call them last before and first after): no fork comes while the heap sets
// itself up, and the heap's locks are held across it.
void PrivateHeapBeforeFork();
void PrivateHeapAfterForkInParent();
void PrivateHeapAfterForkInChild();

// TableStart returns the socket table's slots (slots_bytes, zeroed) and
// makes room for its objects; TableAlloc returns one of them (size zeroed
// bytes aligned to align); TableFree gives back a TableAlloc block never
// published. Each nullptr on failure. In the shim a table arena of their
// own (table_arena.h), then the private heap; elsewhere the private heap.
void* TableStart(size_t slots_bytes);
void* TableAlloc(size_t size, size_t align);
void TableFree(void* p);

// TableNew constructs a T with TableAlloc; nullptr on failure.
template <typename T>
T* TableNew() {
  void* p = TableAlloc(sizeof(T), alignof(T));
  return p ? new (p) T() : nullptr;
}

// PrivateNew constructs a T in the private heap; nullptr on failure.
template <typename T, typename... Args>
T* PrivateNew(Args&&... args) {
  void* p = PrivateAlloc(sizeof(T));
  return p ? new (p) T(std::forward<Args>(args)...) : nullptr;
}

}  // namespace tcpadvise

#endif  // TCPADVISE_PRIVATE_ALLOC_H_
