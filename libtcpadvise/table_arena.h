// TableArena: memory handed out by bumping a pointer through one mapping,
// never given back: the socket table's in the shim (private_alloc.h:
// TableStart, TableAlloc), its slots at the mapping's start and its objects
// (entries, their statistics' sparse tables) after them. The slots end
// kSlotsTail bytes into a page and the entries start right there: the table
// keeps its lowest fds' slots last (socket_table.h: Slot), so that the
// slots of fds 0-127 and a process's first three entries (a fork server's
// listeners and the connection it hands to its child) are one page, which
// the parent's accept and close and the child's work write after a fork:
// each side copies that page, not two. The table reuses
// its entries through its free list and a statistic's table stays with its
// entry, so nothing is ever freed; a fork server that only observes then
// never starts the private heap (jemalloc), whose metadata its parent would
// write, every fork copy, and its fork handlers set up again in every child.
// A fork child's blocks come after its parent's, in pages the parent never
// wrote (a fresh zero page each, not a copy).
#ifndef TCPADVISE_TABLE_ARENA_H_
#define TCPADVISE_TABLE_ARENA_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>

namespace tcpadvise {

class TableArena {
 public:
  // TableArena::Reserve maps slots_bytes, ending kSlotsTail bytes into a
  // page, then objects_bytes, reserved rather than committed (MAP_NORESERVE:
  // only the pages written cost memory); returns the zeroed slots, or
  // nullptr when the mapping fails or was made before.
  void* Reserve(size_t slots_bytes, size_t objects_bytes);
  static constexpr size_t kSlotsTail = 1024;

  // TableArena::Alloc returns size zeroed bytes aligned to align (a power
  // of two), a block of a page or less within one page, or nullptr when no
  // mapping was reserved or it has no room left. Blocks of a KiB or more
  // (the table's entries) come from the first half of the objects' room,
  // right after the slots, smaller ones (their statistics' tables, a rule's
  // counters) from the second: neither pads the other's pages. Lock-free,
  // and safe in a signal handler.
  void* Alloc(size_t size, size_t align);

  // TableArena::Owns tells whether p came from Alloc.
  bool Owns(const void* p) const {
    const uintptr_t at = reinterpret_cast<uintptr_t>(p);
    return at >= objects_ && at < end_;
  }

 private:
  static constexpr size_t kLargeBlock = 1024;
  std::atomic<uintptr_t> next_[2] = {};  // small blocks, large blocks
  uintptr_t objects_ = 0;  // where the large blocks' half starts
  uintptr_t middle_ = 0;   // where the small blocks' half starts
  uintptr_t end_ = 0;
};

}  // namespace tcpadvise

#endif  // TCPADVISE_TABLE_ARENA_H_
