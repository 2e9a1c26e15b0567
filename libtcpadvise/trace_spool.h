// TraceSpool: a file that a process tree's fork children append their final
// traces to through a shared mapping, without a system call: the parent
// creates and maps it before its first fork (trace_writer.h:
// SpoolBeforeFork), each child inherits the mapping, claims a record with
// one compare-and-swap on the header's offset, copies its trace and marks
// the record committed. A record
// is in the kernel's page cache once copied: it outlives the child and its
// parent, SIGKILL included.
//
// The file (little-endian, as the machine writes it), read by
// advisor/tcpadvise/trace/spool.py:
//   header (kSpoolHeaderBytes, a page): magic "TCPASPOL", version u32 (2),
//     header size u32, capacity u64 (the file's size), offset u64 (the next
//     record's claim; beyond the room once a claim failed), owner pid i32,
//     record bound u32, created unix ns u64, allocated u64 (the bytes given
//     blocks so far, SpoolReserve), zeros up to byte 64; then
//     kSpoolSampleSlots sample slots of 16 bytes (SpoolSampleChild): key u32
//     (a service's SocketIdentity::ServiceKey + 1, its role's number, 0
//     unknown, 1 client, 2 server, 3 listener, << 16 | its service port; 0:
//     free), seen u32 (the children of the service that asked), represented
//     u32 (the children their written traces stand for), zeros; then
//     kSpoolTreeCounts counts u32 that the processes of the tree share for
//     counts of their own (the call sites' first writes: call_sites.h,
//     CallSitesShareTree); zeros;
//   records from the header's end, each at a multiple of 8 (one that fits
//     in a 4 KiB page within one page; zeros between): magic u32
//     (kSpoolRecordMagic, bytes ff 'R' 'E' 'C': 0xff is in no UTF-8 text, so a
//     reader that lost its place finds the next record by its magic), length
//     u32 (the JSON's bytes), state u32 (kSpoolCommitted once the JSON is
//     whole), pid i32, the JSON, zeros up to the next multiple of 8.
#ifndef TCPADVISE_TRACE_SPOOL_H_
#define TCPADVISE_TRACE_SPOOL_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>

namespace tcpadvise {

constexpr char kSpoolMagic[8] = {'T', 'C', 'P', 'A', 'S', 'P', 'O', 'L'};
constexpr uint32_t kSpoolVersion = 2;
constexpr uint32_t kSpoolRecordMagic = 0x434552ff;  // ff 'R' 'E' 'C' in memory
constexpr uint32_t kSpoolCommitted = 0x54494d43;    // 'C' 'M' 'I' 'T' in memory
// kSpoolCapacity: 64 MiB, sparse (the file takes on disk, and the page cache
// holds, only the pages written). A PostgreSQL backend's trace is some 3 KB,
// a page of the spool (kSpoolPage): the parent rolls over at half full
// (SpoolHalfFull), some 8,000 children a spool, and the other half is room
// for the children forked before the roll over that exit after it, 2,000 of
// them with 16 KiB traces. Address space
// is what it costs the parent and each child.
constexpr uint64_t kSpoolCapacity = uint64_t{64} << 20;
// kSpoolRecordBound: a larger trace goes to a file of its own (a child that
// held 10k connections): one child does not take a spool's room from the
// others.
constexpr uint32_t kSpoolRecordBound = 1u << 20;
// kSpoolFirstReserve, kSpoolReserveStep: the spool's blocks are allocated
// (fallocate) ahead of the claims, by the process that forks (SpoolReserve;
// a daemon's server, say, whose spool its first parent made): a child
// that wrote into a hole of a full file system would get SIGBUS, where a
// claim past the allocated bytes fails, and its trace goes to a file. 256 KiB
// at first (a process that forks only to exec leaves an empty spool: 256
// KiB on disk, or of memory on tmpfs), then as much again each time half the
// room ahead is claimed, 4 MiB at most at a time.
constexpr uint64_t kSpoolFirstReserve = uint64_t{256} << 10;
constexpr uint64_t kSpoolReserveStep = uint64_t{4} << 20;

// kSpoolPage: records up to a page long never straddle two (SpoolAppend).
constexpr uint64_t kSpoolPage = 4096;

// SpoolSampleSlot counts one service's fork children that asked whether to
// write their trace (SpoolSampleChild).
struct SpoolSampleSlot {
  std::atomic<uint32_t> key;
  std::atomic<uint32_t> seen;
  std::atomic<uint32_t> represented;
  uint32_t reserved;
};
constexpr int kSpoolSampleSlots = 128;
constexpr int kSpoolTreeCounts = 256;

struct SpoolHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t capacity;
  std::atomic<uint64_t> offset;
  int32_t owner_pid;
  uint32_t record_bound;
  uint64_t created_unix_ns;
  std::atomic<uint64_t> allocated;
  uint64_t reserved;
  SpoolSampleSlot samples[kSpoolSampleSlots];
  std::atomic<uint32_t> tree_counts[kSpoolTreeCounts];
};
// kSpoolHeaderBytes: the header's page, which every child writes (its
// claim); the records start on the next.
constexpr size_t kSpoolHeaderBytes = 4096;
static_assert(offsetof(SpoolHeader, samples) == 64, "the sample slots start at byte 64");
static_assert(sizeof(SpoolHeader) <= kSpoolHeaderBytes, "the spool's header fits in its page");

struct SpoolRecordHeader {
  uint32_t magic;
  uint32_t length;
  std::atomic<uint32_t> state;
  int32_t pid;
};
static_assert(sizeof(SpoolRecordHeader) == 16, "a record's header is 16 bytes");

// MapSpool creates path (O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0600), sizes it to
// capacity (sparse), allocates its first kSpoolFirstReserve bytes, maps it
// shared and writes its header; its device and inode go to dev and ino.
// nullptr with errno set on failure (the file is removed). The fd is closed
// either way.
SpoolHeader* MapSpool(const char* path, uint64_t capacity, int owner_pid, uint64_t now_unix_ns, uint64_t* dev,
                      uint64_t* ino);

// SpoolReserveStep: the bytes SpoolReserve adds to what is allocated.
inline uint64_t SpoolReserveStep(uint64_t allocated) {
  return allocated < kSpoolReserveStep ? allocated : kSpoolReserveStep;
}

// SpoolNeedsReserve: whether less than half the next step is left allocated
// ahead of the claims (one read of the header's cache line).
inline bool SpoolNeedsReserve(const SpoolHeader* spool) {
  const uint64_t allocated = spool->allocated.load(std::memory_order_relaxed);
  return allocated < spool->capacity &&
         spool->offset.load(std::memory_order_relaxed) + SpoolReserveStep(allocated) / 2 > allocated;
}

// SpoolReserve allocates the spool's next step (SpoolReserveStep): path
// opened again (O_NOFOLLOW), the same file as mapped (dev and ino) or none,
// fallocate, close; some ten times in a spool's life. False when it could
// not (the claims then stop at what is allocated). Processes of one tree
// may call it at once: the allocated room only grows.
bool SpoolReserve(SpoolHeader* spool, const char* path, uint64_t dev, uint64_t ino);

// UnmapSpool unmaps a spool this process mapped (the file stays).
void UnmapSpool(SpoolHeader* spool);

// SpoolAppend copies size bytes into a new committed record of the spool
// (claimed by compare-and-swap on the header's offset, then copied, then
// committed with release ordering); false when they are over the record
// bound or past the room left (the caller writes them elsewhere). No system call, nothing allocated: the
// pages it writes are the shared file's.
bool SpoolAppend(SpoolHeader* spool, const char* data, size_t size, int pid);

// ChildTraceSampling: which of a service's fork children write their final
// trace (TCPADVISE_CHILD_TRACES_FIRST, TCPADVISE_CHILD_TRACES_EVERY).
#define TCPADVISE_CHILD_TRACES_FIRST_DEFAULT 16
#define TCPADVISE_CHILD_TRACES_EVERY_DEFAULT 16
struct ChildTraceSampling {
  uint64_t first = TCPADVISE_CHILD_TRACES_FIRST_DEFAULT;
  uint32_t every_shift = __builtin_ctz(TCPADVISE_CHILD_TRACES_EVERY_DEFAULT);
};

// SpoolSampleSlotOf: the sample slot of a service in the spool (key: its
// SocketIdentity::ServiceKey), claimed if it has none yet; nullptr when every
// slot is another service's.
SpoolSampleSlot* SpoolSampleSlotOf(SpoolHeader* spool, uint32_t key);

// SpoolSampleChild counts a fork child of one connection in its service's
// slot and decides whether it writes its final trace, from the count of
// those that asked before it: the first `first` write, each standing for
// itself (1), then the last of every 2^every_shift, standing for those before
// it that wrote none and itself (2^every_shift); the others none (0). The
// child adds what its trace stands for to the slot's represented once the
// trace is written (SpoolSampleWritten): the reader tells from seen less
// represented the children no trace stands for (the last of a service's,
// fewer than 2^every_shift, and a sampled child that died before writing).
uint32_t SpoolSampleChild(SpoolSampleSlot* slot, const ChildTraceSampling& sampling);

inline void SpoolSampleWritten(SpoolSampleSlot* slot, uint32_t represents) {
  slot->represented.fetch_add(represents, std::memory_order_relaxed);
}

// SpoolHalfFull: whether the claims reached half the capacity (the parent
// maps a new spool for its next children).
inline bool SpoolHalfFull(const SpoolHeader* spool) {
  return spool->offset.load(std::memory_order_relaxed) > spool->capacity / 2;
}

}  // namespace tcpadvise

#endif  // TCPADVISE_TRACE_SPOOL_H_
