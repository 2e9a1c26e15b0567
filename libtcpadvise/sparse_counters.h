// SparseCounters: a fixed range of counters of which most instances use a
// few, in three tiers so that an open connection costs what it uses, not what
// it might. The socket statistics keep their histogram buckets, their calls
// by API and their errno counts in them.
//
//   1. inline: a handful of (key, count) pairs inside the object, each one
//      64-bit word (a 48-bit count above the key's 16-bit tag) so that a
//      pair costs 8 bytes, a reader loads tag and count at once, and an add
//      that would pass 48 bits shows as the add's carry;
//      a count about to pass 2^48 goes on in a table slot of its key, then
//      its chunk (a reader sums them all);
//   2. tables: small open-addressed tables of (key, 32-bit count) from the
//      private heap, 8 slots, then 16, 32, 64 and 128 (a level is added when
//      a key finds no free slot within kProbes of its home in the levels
//      before): 64 B holds 4 to 8 more keys, all five levels (1.7 KB) about
//      240, at 6 bytes a key plus free slots. Each level keeps a 64-bit
//      filter of the keys it holds, so that a lookup skips the levels that
//      cannot hold its key instead of probing them;
//   3. chunks: 128 dense 64-bit counters (1 KB) per 128 keys, hung on the
//      last level, allocated only for a key that finds no room in the
//      tables, or whose 32-bit table count would overflow (it is promoted:
//      further counts of that key go to its chunk, and a reader sums both).
//      Once a chunk exists every count of its keys goes there first, tables
//      or not (a key may keep an older count in a table slot; a reader sums
//      both): a lookup finds it in a few loads instead of probing the dense
//      last levels, and a new key of that chunk takes no table slot.
//
// Threads: the thread calling on a socket adds without a lock (Counter
// semantics); readers (snapshots) may read at the same time. Slots are
// claimed with a compare-and-swap and tables and chunks published with
// release stores; a table grows by chaining a new level, never by copying,
// and nothing is freed (Reset zeroes it all for the entry's next socket), so a
// racing reader or writer never touches freed memory and never misses a count
// that a move would carry.
#ifndef TCPADVISE_SPARSE_COUNTERS_H_
#define TCPADVISE_SPARSE_COUNTERS_H_

#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <atomic>

#include "counter.h"
#include "private_alloc.h"

namespace tcpadvise {

// SparseCounters<kInline, kKeys> are kKeys counters of which most instances
// use a few (tiers above). A count that finds no room (allocation failed, or
// a signal handler interrupted the private heap: t_in_private_heap) is added
// to lost() instead: it fails open, never blocks.
template <int kInline, int kKeys>
class SparseCounters {
 public:
  static constexpr int kChunkBits = 7;
  static constexpr int kChunkSize = 1 << kChunkBits;
  static constexpr int kChunks = (kKeys + kChunkSize - 1) / kChunkSize;
  // Table levels: level l has kFirstTableSlots << l slots.
  static constexpr int kFirstTableBits = 3;
  static constexpr int kFirstTableSlots = 1 << kFirstTableBits;
  static constexpr int kTableLevels = 5;
  static constexpr int kTableSlots = kFirstTableSlots * ((1 << kTableLevels) - 1);
  // kProbes bounds a key's search in one level (linear probing from its home).
  static constexpr int kProbes = 8;
  static_assert(kKeys < 0xffff, "a key and its tag fit in 16 bits");

  SparseCounters() = default;
  SparseCounters(const SparseCounters&) = delete;
  SparseCounters& operator=(const SparseCounters&) = delete;

  // kPairCountBits: an inline pair's count is the top 48 bits of its word,
  // its tag the low 16.
  static constexpr int kPairCountBits = 48;
  static constexpr int kPairTagBits = 64 - kPairCountBits;
  static constexpr uint64_t kPairMaxCount = (uint64_t{1} << kPairCountBits) - 1;
  static uint64_t TagOf(uint64_t pair) { return pair & 0xffff; }
  static uint64_t CountOf(uint64_t pair) { return pair >> kPairTagBits; }

  // SparseCounters::Add counts n at key (0 <= key < kKeys). The inline scan is
  // the fast path; the tables and chunks are out of line.
  [[gnu::always_inline]] void Add(int key, uint64_t n) {
    const uint64_t tag = static_cast<uint64_t>(key + 1);
    for (int i = 0; i < kInline; ++i) {
      const uint64_t pair = pairs_[i].load(std::memory_order_relaxed);
      // Expected: a socket's calls mostly go through one API, and its first
      // pair holds it (laid out in line, no jump there and back).
      if (__builtin_expect(TagOf(pair) == tag, 1)) {
        // A count about to pass 48 bits goes on in the tiers beyond.
        uint64_t sum;
        if (__builtin_expect(n > kPairMaxCount || __builtin_add_overflow(pair, n << kPairTagBits, &sum), 0)) {
          return AddSlow(key, n);
        }
        pairs_[i].store(sum, std::memory_order_relaxed);
        return;
      }
      if (pair == 0) return AddSlow(key, n);
    }
    AddBeyondInline(key, n);
  }

  // SparseCounters::InlineKey is the key the first inline pair holds, -1
  // while it holds none: a plain load and compare on the hot path.
  [[gnu::always_inline]] int InlineKey() const {
    return static_cast<int>(TagOf(pairs_[0].load(std::memory_order_relaxed))) - 1;
  }

  // SparseCounters::ClaimInline gives key the first inline pair, with a count
  // of 0, unless the pair holds a key already (a compare-and-swap: another
  // thread's claim stands). For counts the caller implies (SocketStats'
  // per-API counts).
  void ClaimInline(int key) {
    uint64_t free_pair = 0;
    pairs_[0].compare_exchange_strong(free_pair, static_cast<uint64_t>(key + 1), std::memory_order_relaxed);
  }

  // SparseCounters::AddOutOfLine counts n at key without the inline fast
  // path: for merges.
  void AddOutOfLine(int key, uint64_t n) { AddSlow(key, n); }

  // SparseCounters::AddLost counts n that have no key (merged from another's lost).
  void AddLost(uint64_t n) { lost_.Add(n); }

  // SparseCounters::Get returns the count at key.
  uint64_t Get(int key) const;

  // SparseCounters::ForEach calls fn(key, count) for each non-zero count, in
  // ascending key order.
  template <typename Fn>
  void ForEach(Fn fn) const;

  // SparseCounters::Total is the sum of every count, lost() included.
  uint64_t Total() const;

  // SparseCounters::lost counts what could not be stored at its key.
  uint64_t lost() const { return lost_.Get(); }

  // SparseCounters::MergeFrom adds every count of other.
  void MergeFrom(const SparseCounters& other);

  // SparseCounters::Reset zeroes every count; tables and chunks stay allocated.
  void Reset();

  // SparseCounters::HeapBytes is what this instance allocated (as asked of
  // the heap, before its size classes).
  uint64_t HeapBytes() const;

  // SparseCounters::TableLevels is how many table levels are allocated.
  int TableLevels() const;

  // SparseCounters::HasChunks tells whether any chunk is allocated.
  bool HasChunks() const;

 private:
  struct Chunks {
    std::atomic<Counter*> chunk[kChunks];
  };
  // Table is one level's header; its 32-bit counts, then its 16-bit tags
  // (key + 1; 0 marks a free slot) follow it in the same block.
  struct Table {
    union {
      std::atomic<Table*> next;     // levels before the last
      std::atomic<Chunks*> chunks;  // the last level: the chunk tier
    };
    // filter has bit FilterBit(key) set for each key the level holds.
    std::atomic<uint64_t> filter;
  };

  static constexpr int SlotsOf(int level) { return kFirstTableSlots << level; }
  static constexpr size_t TableBytes(int level) {
    return sizeof(Table) + static_cast<size_t>(SlotsOf(level)) * (sizeof(uint32_t) + sizeof(uint16_t));
  }
  static std::atomic<uint32_t>* CountsOf(Table* t) { return reinterpret_cast<std::atomic<uint32_t>*>(t + 1); }
  static std::atomic<uint16_t>* TagsOf(Table* t, int level) {
    return reinterpret_cast<std::atomic<uint16_t>*>(CountsOf(t) + SlotsOf(level));
  }
  // Home is key's first slot in level: Fibonacci hashing spreads the runs
  // of neighbouring keys a histogram uses over the level.
  static uint32_t Home(int key, int level) {
    return (static_cast<uint32_t>(key + 1) * 0x9e3779b1u) >> (32 - kFirstTableBits - level);
  }
  static int ProbesOf(int level) { return SlotsOf(level) < kProbes ? SlotsOf(level) : kProbes; }
  // FilterBit hashes key apart from Home, so that neighbours in a level
  // seldom share a bit.
  static uint64_t FilterBit(int key) {
    return uint64_t{1} << ((static_cast<uint32_t>(key + 1) * 0x9e3779b1u >> 20) & 63);
  }
  // kChunkTierFlag, set in level 0's filter once the chunk tier is
  // published (and again after a Reset, which keeps it), says that an add
  // should look in the chunks first. A hint only, sharing its bit with the
  // keys whose filter bit is 63: such a key in level 0 makes an add look for
  // a chunk in vain (a walk of the levels' links), and the flag makes those
  // keys probe level 0 in vain. Keeping bit 63 out of FilterBit cost a
  // multiply on every table lookup: 3 ns more a write and read over 61
  // sizes (hooks_bench, 15 alternating runs: 47.7 against 44.6 ns).
  static constexpr uint64_t kChunkTierFlag = uint64_t{1} << 63;
  static Table* NextOf(const Table* t, int level) {
    return level + 1 < kTableLevels ? t->next.load(std::memory_order_acquire) : nullptr;
  }
  // AddToTableCount adds n to a 32-bit table count; false (nothing added)
  // when the sum would overflow it.
  static bool AddToTableCount(std::atomic<uint32_t>* count, uint64_t n) {
    const uint64_t sum = count->load(std::memory_order_relaxed) + n;
    if (sum > UINT32_MAX) return false;
    count->store(static_cast<uint32_t>(sum), std::memory_order_relaxed);
    return true;
  }
  // LastLevel is the last level of the levels from first (level 0),
  // nullptr until it is allocated.
  static Table* LastLevel(Table* first) {
    Table* t = first;
#pragma GCC unroll 8
    for (int level = 0; t != nullptr && level + 1 < kTableLevels; ++level) t = t->next.load(std::memory_order_acquire);
    return t;
  }
  // LastTable is this instance's last level, nullptr until it is allocated.
  Table* LastTable() const { return LastLevel(tables_.load(std::memory_order_acquire)); }
  // ChunksOf is the chunk tier hung on last (the last level), or nullptr.
  static Chunks* ChunksOf(const Table* last) { return last ? last->chunks.load(std::memory_order_acquire) : nullptr; }
  // ChunkCounter is key's chunk counter, nullptr when its chunk is absent.
  static Counter* ChunkCounter(const Chunks* chunks, int key) {
    Counter* chunk = chunks ? chunks->chunk[key >> kChunkBits].load(std::memory_order_acquire) : nullptr;
    return chunk ? &chunk[key & (kChunkSize - 1)] : nullptr;
  }

  // AddBeyondInline counts n at a key the inline pairs do not hold: in its
  // chunk if it has one, else in the table level that holds it, else
  // through AddSlow.
  [[gnu::noinline]] void AddBeyondInline(int key, uint64_t n);
  [[gnu::noinline]] void AddSlow(int key, uint64_t n);
  void AddAt(int key, uint64_t n, bool may_allocate);
  // AddToTables finds or claims key's slot in the tables (adding levels if
  // may_allocate) and adds n there; false when the key is to be counted in
  // its chunk: no room, or its count would overflow.
  bool AddToTables(int key, uint64_t n, bool may_allocate);

  // pairs_: count << kPairTagBits | (key + 1); 0 marks a free slot.
  std::atomic<uint64_t> pairs_[kInline] = {};
  std::atomic<Table*> tables_{nullptr};  // level 0
  Counter lost_;
};

// ---- implementation ----

// PublishOnce stores fresh (zeroed, from TableAlloc) into slot unless
// another thread got there first; returns what the slot holds, or nullptr
// when it is empty and memory ran out or may not be allocated.
template <typename T>
inline T* PublishOnce(std::atomic<T*>* slot, size_t bytes, bool may_allocate) {
  T* current = slot->load(std::memory_order_acquire);
  if (current != nullptr || !may_allocate) return current;
  T* fresh = static_cast<T*>(TableAlloc(bytes, alignof(T)));
  if (fresh == nullptr) return nullptr;
  if (!slot->compare_exchange_strong(current, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
    TableFree(fresh);  // never published: nobody else can see it
    return current;
  }
  return fresh;
}

template <int kInline, int kKeys>
void SparseCounters<kInline, kKeys>::AddBeyondInline(int key, uint64_t n) {
  Table* table = tables_.load(std::memory_order_acquire);
  if (table == nullptr) return AddSlow(key, n);
  // Chunk first: a spread histogram's keys (a socket's times, hundreds of
  // buckets) mostly live in chunks, which hang on the last level, a few
  // loads away; probing the dense last levels before them cost some 150
  // instructions an add. Level 0's filter says whether the chunk tier
  // exists, so that a histogram without one probes its levels as before.
  uint64_t filter = table->filter.load(std::memory_order_relaxed);
  if (filter & kChunkTierFlag) {
    if (Counter* c = ChunkCounter(ChunksOf(LastLevel(table)), key); c != nullptr) {
      c->Add(n);
      return;
    }
  }
  const uint16_t tag = static_cast<uint16_t>(key + 1);
  const uint64_t bit = FilterBit(key);
  for (int level = 0;;) {
    if (filter & bit) {
      std::atomic<uint16_t>* tags = TagsOf(table, level);
      const uint32_t mask = static_cast<uint32_t>(SlotsOf(level) - 1);
      uint32_t slot = Home(key, level);
      for (int i = 0; i < ProbesOf(level); ++i, slot = (slot + 1) & mask) {
        const uint16_t t = tags[slot].load(std::memory_order_relaxed);
        if (t == tag) {
          if (!AddToTableCount(&CountsOf(table)[slot], n)) AddSlow(key, n);  // promoted to its chunk
          return;
        }
        if (t == 0) break;
      }
    }
    table = NextOf(table, level);
    if (table == nullptr) break;
    ++level;
    filter = table->filter.load(std::memory_order_relaxed);
  }
  AddSlow(key, n);
}

template <int kInline, int kKeys>
bool SparseCounters<kInline, kKeys>::AddToTables(int key, uint64_t n, bool may_allocate) {
  const uint16_t tag = static_cast<uint16_t>(key + 1);
  std::atomic<Table*>* link = &tables_;
  for (int level = 0; level < kTableLevels; ++level) {
    Table* table = PublishOnce(link, TableBytes(level), may_allocate);
    if (table == nullptr) return false;
    std::atomic<uint16_t>* tags = TagsOf(table, level);
    const uint32_t mask = static_cast<uint32_t>(SlotsOf(level) - 1);
    uint32_t slot = Home(key, level);
    for (int i = 0; i < ProbesOf(level); ++i, slot = (slot + 1) & mask) {
      uint16_t t = tags[slot].load(std::memory_order_acquire);
      // Claim a free slot; a racing writer may have claimed it first, for
      // this key or another.
      if (t == 0 && tags[slot].compare_exchange_strong(t, tag, std::memory_order_acq_rel)) {
        table->filter.fetch_or(FilterBit(key), std::memory_order_relaxed);
        t = tag;
      }
      if (t == tag) return AddToTableCount(&CountsOf(table)[slot], n);
    }
    link = &table->next;
  }
  return false;
}

template <int kInline, int kKeys>
void SparseCounters<kInline, kKeys>::AddAt(int key, uint64_t n, bool may_allocate) {
  const uint64_t tag = static_cast<uint64_t>(key + 1);
  for (int i = 0; i < kInline; ++i) {
    uint64_t pair = pairs_[i].load(std::memory_order_acquire);
    // Claim the free slot with the count; a racing writer may have claimed
    // it first.
    if (pair == 0 && n <= kPairMaxCount &&
        pairs_[i].compare_exchange_strong(pair, n << kPairTagBits | tag, std::memory_order_acq_rel)) {
      return;
    }
    if (TagOf(pair) == tag) {
      if (n <= kPairMaxCount - CountOf(pair)) {
        pairs_[i].store(pair + (n << kPairTagBits), std::memory_order_relaxed);
        return;
      }
      break;  // about to pass 48 bits: promoted to the tables, then its chunk
    }
  }
  // A key whose chunk exists is counted there (chunk first, as in
  // AddBeyondInline), whether or not a table slot holds some of its count.
  Table* last = LastTable();
  if (Counter* c = ChunkCounter(ChunksOf(last), key); c != nullptr) {
    c->Add(n);
    return;
  }
  if (AddToTables(key, n, may_allocate)) return;
  // No room in the tables, or a table count about to overflow (after 2^32
  // counts, so the levels it may add are no matter): key's chunk.
  last = nullptr;
  std::atomic<Table*>* link = &tables_;
  for (int level = 0; level < kTableLevels && link != nullptr; ++level) {
    last = PublishOnce(link, TableBytes(level), may_allocate);
    link = last != nullptr ? &last->next : nullptr;
  }
  Chunks* chunks = last ? PublishOnce(&last->chunks, sizeof(Chunks), may_allocate) : nullptr;
  if (chunks != nullptr) tables_.load(std::memory_order_acquire)->filter.fetch_or(kChunkTierFlag, std::memory_order_relaxed);
  Counter* chunk =
      chunks ? PublishOnce(&chunks->chunk[key >> kChunkBits], sizeof(Counter) * kChunkSize, may_allocate) : nullptr;
  (chunk != nullptr ? chunk[key & (kChunkSize - 1)] : lost_).Add(n);
}

template <int kInline, int kKeys>
void SparseCounters<kInline, kKeys>::AddSlow(int key, uint64_t n) {
  AddAt(key, n, !t_in_private_heap);
}

template <int kInline, int kKeys>
uint64_t SparseCounters<kInline, kKeys>::Get(int key) const {
  const uint16_t tag = static_cast<uint16_t>(key + 1);
  uint64_t n = 0;
  for (int i = 0; i < kInline; ++i) {
    const uint64_t pair = pairs_[i].load(std::memory_order_acquire);
    if (TagOf(pair) == tag) n += CountOf(pair);
  }
  Table* first = tables_.load(std::memory_order_acquire);
  int level = 0;
  for (Table* table = first; table != nullptr; table = NextOf(table, level), ++level) {
    std::atomic<uint16_t>* tags = TagsOf(table, level);
    const uint32_t mask = static_cast<uint32_t>(SlotsOf(level) - 1);
    uint32_t slot = Home(key, level);
    for (int i = 0; i < ProbesOf(level); ++i, slot = (slot + 1) & mask) {
      if (tags[slot].load(std::memory_order_acquire) == tag) n += CountsOf(table)[slot].load(std::memory_order_relaxed);
    }
  }
  const Counter* c = ChunkCounter(ChunksOf(LastTable()), key);
  return c ? n + c->Get() : n;
}

template <int kInline, int kKeys>
uint64_t SparseCounters<kInline, kKeys>::Total() const {
  uint64_t n = lost_.Get();
  for (int i = 0; i < kInline; ++i) n += CountOf(pairs_[i].load(std::memory_order_relaxed));
  Table* first = tables_.load(std::memory_order_acquire);
  int level = 0;
  for (Table* table = first; table != nullptr; table = NextOf(table, level), ++level) {
    for (int i = 0; i < SlotsOf(level); ++i) n += CountsOf(table)[i].load(std::memory_order_relaxed);
  }
  const Chunks* chunks = ChunksOf(LastTable());
  for (int c = 0; chunks != nullptr && c < kChunks; ++c) {
    const Counter* chunk = chunks->chunk[c].load(std::memory_order_acquire);
    for (int i = 0; chunk != nullptr && i < kChunkSize; ++i) n += chunk[i].Get();
  }
  return n;
}

template <int kInline, int kKeys>
void SparseCounters<kInline, kKeys>::MergeFrom(const SparseCounters& other) {
  // Tier by tier, in no order, each count through Add's lookup (a group
  // mostly holds the key already): a group folds in every closed
  // connection, and ForEach's sorted walk with a slot search (AddAt) per
  // key cost twice as much for a spread histogram (bench/histogram_adds.cc
  // --merge). A key may have counts in several tiers: each is added.
  for (int i = 0; i < kInline; ++i) {
    const uint64_t pair = other.pairs_[i].load(std::memory_order_acquire);
    if (CountOf(pair) != 0) Add(static_cast<int>(TagOf(pair)) - 1, CountOf(pair));
  }
  Table* table = other.tables_.load(std::memory_order_acquire);
  for (int level = 0; table != nullptr; table = NextOf(table, level), ++level) {
    std::atomic<uint16_t>* tags = TagsOf(table, level);
    for (int i = 0; i < SlotsOf(level); ++i) {
      const uint16_t tag = tags[i].load(std::memory_order_acquire);
      const uint64_t c = CountsOf(table)[i].load(std::memory_order_relaxed);
      if (tag != 0 && c != 0) Add(tag - 1, c);
    }
  }
  // A chunk this side has too is added counter by counter.
  const Chunks* theirs = ChunksOf(other.LastTable());
  const Chunks* mine = ChunksOf(LastTable());
  for (int c = 0; theirs != nullptr && c < kChunks; ++c) {
    const Counter* chunk = theirs->chunk[c].load(std::memory_order_acquire);
    if (chunk == nullptr) continue;
    Counter* into = mine != nullptr ? mine->chunk[c].load(std::memory_order_acquire) : nullptr;
    for (int i = 0; i < kChunkSize; ++i) {
      const uint64_t n = chunk[i].Get();
      if (n == 0) continue;
      if (into != nullptr) {
        into[i].Add(n);
      } else {
        Add((c << kChunkBits) + i, n);
      }
    }
  }
  lost_.Add(other.lost_.Get());
}

template <int kInline, int kKeys>
void SparseCounters<kInline, kKeys>::Reset() {
  for (int i = 0; i < kInline; ++i) pairs_[i].store(0, std::memory_order_release);
  lost_.Set(0);
  Table* first = tables_.load(std::memory_order_acquire);
  int level = 0;
  for (Table* table = first; table != nullptr; table = NextOf(table, level), ++level) {
    table->filter.store(0, std::memory_order_relaxed);
    for (int i = 0; i < SlotsOf(level); ++i) {
      CountsOf(table)[i].store(0, std::memory_order_relaxed);
      TagsOf(table, level)[i].store(0, std::memory_order_release);
    }
  }
  Chunks* chunks = ChunksOf(LastTable());
  for (int c = 0; chunks != nullptr && c < kChunks; ++c) {
    Counter* chunk = chunks->chunk[c].load(std::memory_order_acquire);
    for (int i = 0; chunk != nullptr && i < kChunkSize; ++i) chunk[i].Set(0);
  }
  if (chunks != nullptr) first->filter.store(kChunkTierFlag, std::memory_order_relaxed);  // the tier stays
}

template <int kInline, int kKeys>
uint64_t SparseCounters<kInline, kKeys>::HeapBytes() const {
  uint64_t bytes = 0;
  Table* first = tables_.load(std::memory_order_acquire);
  int level = 0;
  for (Table* table = first; table != nullptr; table = NextOf(table, level), ++level) bytes += TableBytes(level);
  const Chunks* chunks = ChunksOf(LastTable());
  if (chunks == nullptr) return bytes;
  bytes += sizeof(Chunks);
  for (int c = 0; c < kChunks; ++c) {
    if (chunks->chunk[c].load(std::memory_order_acquire) != nullptr) bytes += sizeof(Counter) * kChunkSize;
  }
  return bytes;
}

template <int kInline, int kKeys>
int SparseCounters<kInline, kKeys>::TableLevels() const {
  int levels = 0;
  for (Table* t = tables_.load(std::memory_order_acquire); t != nullptr; t = NextOf(t, levels - 1)) ++levels;
  return levels;
}

template <int kInline, int kKeys>
bool SparseCounters<kInline, kKeys>::HasChunks() const {
  const Chunks* chunks = ChunksOf(LastTable());
  for (int c = 0; chunks != nullptr && c < kChunks; ++c) {
    if (chunks->chunk[c].load(std::memory_order_acquire) != nullptr) return true;
  }
  return false;
}

template <int kInline, int kKeys>
template <typename Fn>
void SparseCounters<kInline, kKeys>::ForEach(Fn fn) const {
  // The inline and table pairs (at most kInline + kTableSlots), sorted by
  // key; a key lives in one of them, but an inline count promoted past 48
  // bits, or two racing writers, may have put it in two: one entry, both
  // counts. The chunks are dense, in key order.
  struct Pair {
    int key;
    uint64_t count;
  };
  Pair pairs[kInline + kTableSlots];
  int n = 0;
  for (int i = 0; i < kInline; ++i) {
    const uint64_t pair = pairs_[i].load(std::memory_order_acquire);
    const uint64_t c = CountOf(pair);
    if (c != 0) pairs[n++] = {static_cast<int>(TagOf(pair)) - 1, c};
  }
  Table* first = tables_.load(std::memory_order_acquire);
  int level = 0;
  for (Table* table = first; table != nullptr; table = NextOf(table, level), ++level) {
    std::atomic<uint16_t>* tags = TagsOf(table, level);
    for (int i = 0; i < SlotsOf(level); ++i) {
      const uint16_t tag = tags[i].load(std::memory_order_acquire);
      const uint64_t c = CountsOf(table)[i].load(std::memory_order_relaxed);
      if (tag != 0 && c != 0) pairs[n++] = {tag - 1, c};
    }
  }
  std::sort(pairs, pairs + n, [](const Pair& a, const Pair& b) { return a.key < b.key; });
  int merged = 0;
  for (int i = 0; i < n; ++i) {
    if (merged > 0 && pairs[merged - 1].key == pairs[i].key) {
      pairs[merged - 1].count += pairs[i].count;
    } else {
      pairs[merged++] = pairs[i];
    }
  }
  int next = 0;
  const Chunks* chunks = ChunksOf(LastTable());
  for (int c = 0; chunks != nullptr && c < kChunks; ++c) {
    const Counter* chunk = chunks->chunk[c].load(std::memory_order_acquire);
    if (chunk == nullptr) continue;
    for (int i = 0; i < kChunkSize; ++i) {
      const uint64_t count = chunk[i].Get();
      if (count == 0) continue;
      const int key = (c << kChunkBits) + i;
      for (; next < merged && pairs[next].key < key; ++next) fn(pairs[next].key, pairs[next].count);
      // A promoted key has counts in its table slot and its chunk.
      if (next < merged && pairs[next].key == key) {
        fn(key, count + pairs[next++].count);
      } else {
        fn(key, count);
      }
    }
  }
  for (; next < merged; ++next) fn(pairs[next].key, pairs[next].count);
}

}  // namespace tcpadvise

#endif  // TCPADVISE_SPARSE_COUNTERS_H_
