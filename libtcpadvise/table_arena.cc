#include "table_arena.h"

#include <sys/mman.h>
#include <unistd.h>

namespace tcpadvise {

void* TableArena::Reserve(size_t slots_bytes, size_t objects_bytes) {
  if (end_ != 0) return nullptr;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Whole pages of slots, then the page the last kSlotsTail bytes share with the first entries.
  const size_t whole = slots_bytes > kSlotsTail ? (slots_bytes - kSlotsTail + page - 1) & ~(page - 1) : 0;
  void* map = mmap(nullptr, whole + kSlotsTail + objects_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return nullptr;
  // Where the kernel makes every large anonymous mapping's 2 MiB ranges huge
  // pages (transparent_hugepage "always"), the first entry written would
  // take 2 MiB, zeroed, and each fork child's write would split it.
  madvise(map, whole + kSlotsTail + objects_bytes, MADV_NOHUGEPAGE);
  objects_ = reinterpret_cast<uintptr_t>(map) + whole + kSlotsTail;
  middle_ = (objects_ + objects_bytes / 2) & ~(page - 1);
  end_ = objects_ + objects_bytes;
  next_[0].store(middle_, std::memory_order_release);
  next_[1].store(objects_, std::memory_order_release);
  return reinterpret_cast<void*>(objects_ - slots_bytes);
}

void* TableArena::Alloc(size_t size, size_t align) {
  constexpr uintptr_t kPage = 4096;
  const bool large = size >= kLargeBlock;
  std::atomic<uintptr_t>& next = next_[large];
  const uintptr_t end = large ? middle_ : end_;
  uintptr_t at = next.load(std::memory_order_acquire);
  uintptr_t start;
  do {
    if (at == 0) return nullptr;
    start = (at + align - 1) & ~(static_cast<uintptr_t>(align) - 1);
    // A block of a page or less never spans two: a fork child that writes
    // it then copies one page.
    if (size <= kPage && (start & (kPage - 1)) + size > kPage) start = (start + kPage - 1) & ~(kPage - 1);
    if (start + size > end || start + size < start) return nullptr;
  } while (!next.compare_exchange_weak(at, start + size, std::memory_order_acquire, std::memory_order_acquire));
  return reinterpret_cast<void*>(start);
}

}  // namespace tcpadvise
