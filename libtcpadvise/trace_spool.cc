#include "trace_spool.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "real_libc.h"

namespace tcpadvise {
namespace {

// Allocate gives the file's blocks in [0, end) (fallocate, the size kept):
// a page a child writes there never faults with SIGBUS for want of room.
bool Allocate(int fd, uint64_t end) {
  int result;
  while ((result = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(end))) != 0 && errno == EINTR) {
  }
  return result == 0;
}

}  // namespace

SpoolHeader* MapSpool(const char* path, uint64_t capacity, int owner_pid, uint64_t now_unix_ns, uint64_t* dev,
                      uint64_t* ino) {
  const int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  const uint64_t allocated = capacity < kSpoolFirstReserve ? capacity : kSpoolFirstReserve;
  struct stat st;
  void* map = MAP_FAILED;
  if (fstat(fd, &st) == 0 && ftruncate(fd, static_cast<off_t>(capacity)) == 0 && Allocate(fd, allocated)) {
    map = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  const int error = errno;
  g_real.close(fd);
  if (map == MAP_FAILED) {
    unlink(path);
    errno = error;
    return nullptr;
  }
  auto* spool = static_cast<SpoolHeader*>(map);
  memcpy(spool->magic, kSpoolMagic, sizeof(kSpoolMagic));
  spool->version = kSpoolVersion;
  spool->header_bytes = kSpoolHeaderBytes;
  spool->capacity = capacity;
  spool->owner_pid = owner_pid;
  spool->record_bound = kSpoolRecordBound;
  spool->created_unix_ns = now_unix_ns;
  spool->allocated.store(allocated, std::memory_order_relaxed);
  spool->offset.store(kSpoolHeaderBytes, std::memory_order_release);
  *dev = st.st_dev;
  *ino = st.st_ino;
  return spool;
}

bool SpoolReserve(SpoolHeader* spool, const char* path, uint64_t dev, uint64_t ino) {
  const int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  const uint64_t allocated = spool->allocated.load(std::memory_order_relaxed);
  const uint64_t step = SpoolReserveStep(allocated);
  const uint64_t end = allocated + step < spool->capacity ? allocated + step : spool->capacity;
  struct stat st;
  const bool same = fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
  const bool reserved = same && Allocate(fd, end);
  const int error = errno;
  g_real.close(fd);
  errno = error;
  // Any process of the tree may reserve (a daemon's children fork from it,
  // not from the spool's owner): the room only grows.
  uint64_t seen = spool->allocated.load(std::memory_order_relaxed);
  while (reserved && seen < end &&
         !spool->allocated.compare_exchange_weak(seen, end, std::memory_order_release, std::memory_order_relaxed)) {
  }
  return reserved;
}

void UnmapSpool(SpoolHeader* spool) { munmap(spool, spool->capacity); }

bool SpoolAppend(SpoolHeader* spool, const char* data, size_t size, int pid) {
  if (size > kSpoolRecordBound) return false;
  const uint64_t need = (sizeof(SpoolRecordHeader) + size + 7) & ~uint64_t{7};
  // The room is what is allocated. A record that fits in a page starts on
  // the next page rather than straddle two: the child then writes (and
  // faults on) one page of the spool, not two (a 3 KB trace straddled one
  // time in three-quarters); the gap stays zeros, which the reader skips.
  // The child's first touch of the header page is a write (an add of 0): a
  // load first would map the shared page read-only, and the claim would
  // fault on it a second time, for write (2 faults a child instead of 1).
  uint64_t claimed = spool->offset.fetch_add(0, std::memory_order_relaxed);
  const uint64_t room = spool->allocated.load(std::memory_order_acquire);
  uint64_t at;
  do {
    at = claimed;
    if (need <= kSpoolPage && (at & (kSpoolPage - 1)) + need > kSpoolPage) {
      at = (at + kSpoolPage - 1) & ~(kSpoolPage - 1);
    }
    if (at + need > room) return false;  // a full spool takes no more claims
  } while (!spool->offset.compare_exchange_weak(claimed, at + need, std::memory_order_relaxed));
  auto* record = reinterpret_cast<SpoolRecordHeader*>(reinterpret_cast<char*>(spool) + at);
  record->magic = kSpoolRecordMagic;
  record->length = static_cast<uint32_t>(size);
  record->pid = pid;
  memcpy(reinterpret_cast<char*>(record) + sizeof(*record), data, size);
  record->state.store(kSpoolCommitted, std::memory_order_release);
  return true;
}

SpoolSampleSlot* SpoolSampleSlotOf(SpoolHeader* spool, uint32_t key) {
  const uint32_t mark = key + 1;
  // Fibonacci hashing: the services of a tree are a few ports, which a
  // plain modulo would crowd in neighbouring slots.
  const uint32_t start = static_cast<uint32_t>((uint64_t{key} * 0x9e3779b97f4a7c15u) >> 57);
  static_assert(kSpoolSampleSlots == 128, "start takes 7 bits");
  for (int probe = 0; probe < kSpoolSampleSlots; ++probe) {
    SpoolSampleSlot& slot = spool->samples[(start + probe) % kSpoolSampleSlots];
    uint32_t held = slot.key.load(std::memory_order_relaxed);
    if (held == 0 && slot.key.compare_exchange_strong(held, mark, std::memory_order_relaxed)) held = mark;
    if (held == mark) return &slot;
  }
  return nullptr;
}

uint32_t SpoolSampleChild(SpoolSampleSlot* slot, const ChildTraceSampling& sampling) {
  const uint64_t index = slot->seen.fetch_add(1, std::memory_order_relaxed);
  const uint64_t every = uint64_t{1} << sampling.every_shift;
  if (index < sampling.first) return 1;
  return (index - sampling.first) % every == every - 1 ? static_cast<uint32_t>(every) : 0;
}

}  // namespace tcpadvise
