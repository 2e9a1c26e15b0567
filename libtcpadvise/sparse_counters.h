// SparseCounters: a fixed range of counters of which most instances use a
// few: a handful of (key, count) pairs inline, and chunks of 128 counters
// allocated from the private heap only when the pairs run out. The socket
// statistics keep their histogram buckets and their errno counts in them, so
// that an open connection costs what it uses, not what it might.
//
// Threads: the thread calling on a socket adds without a lock (Counter
// semantics); readers (snapshots) may read at the same time. Slots are
// claimed with a compare-and-swap and chunks published with release stores;
// chunks are never freed (Reset zeroes them for the entry's next socket), so
// a racing reader or writer never touches freed memory.
#ifndef TCPADVISE_SPARSE_COUNTERS_H_
#define TCPADVISE_SPARSE_COUNTERS_H_

#include <stdint.h>

#include <atomic>

#include "counter.h"
#include "private_alloc.h"

namespace tcpadvise {

// SparseCounters<kInline, kKeys> are kKeys counters of which most instances
// use a few: kInline (key, count) pairs inline, then chunks of 128 counters
// allocated from the private heap on first use. A count that finds no room
// (allocation failed, or a signal handler interrupted the private heap:
// t_in_private_heap) is added to lost() instead: it fails open, never blocks.
template <int kInline, int kKeys>
class SparseCounters {
 public:
  static constexpr int kChunkBits = 7;
  static constexpr int kChunkSize = 1 << kChunkBits;
  static constexpr int kChunks = (kKeys + kChunkSize - 1) / kChunkSize;
  static_assert(kKeys < 0xffff, "a key and its tag fit in 16 bits");

  SparseCounters() = default;
  SparseCounters(const SparseCounters&) = delete;
  SparseCounters& operator=(const SparseCounters&) = delete;

  // SparseCounters::Add counts n at key (0 <= key < kKeys). The inline scan
  // and an allocated chunk are the fast paths; claiming a slot or a chunk is
  // out of line.
  [[gnu::always_inline]] void Add(int key, uint64_t n) {
    const uint16_t tag = static_cast<uint16_t>(key + 1);
    for (int i = 0; i < kInline; ++i) {
      const uint16_t t = tags_[i].load(std::memory_order_relaxed);
      if (t == tag) {
        counts_[i].Add(n);
        return;
      }
      if (t == 0) return AddSlow(key, n);
    }
    // Every slot is taken: a key not among them lives in its chunk.
    if (const Chunks* chunks = chunks_.load(std::memory_order_acquire)) {
      if (Counter* chunk = chunks->chunk[key >> kChunkBits].load(std::memory_order_acquire)) {
        chunk[key & (kChunkSize - 1)].Add(n);
        return;
      }
    }
    AddSlow(key, n);
  }

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

  // SparseCounters::Reset zeroes every count; the chunks stay allocated.
  void Reset();

  // SparseCounters::HeapBytes is what this instance allocated.
  uint64_t HeapBytes() const;

 private:
  struct Chunks {
    std::atomic<Counter*> chunk[kChunks];
  };

  [[gnu::noinline]] void AddSlow(int key, uint64_t n);
  // Slot finds or makes key's counter; nullptr when it would need memory it
  // may not or cannot allocate.
  Counter* Slot(int key, bool may_allocate);
  void AddAt(int key, uint64_t n, bool may_allocate);

  std::atomic<uint16_t> tags_[kInline] = {};  // key + 1; 0 marks a free slot
  Counter counts_[kInline];
  std::atomic<Chunks*> chunks_{nullptr};
  Counter lost_;
};

// ---- implementation ----

// PublishOnce stores fresh (zeroed, from the private heap) into slot unless
// another thread got there first; returns what the slot holds, or nullptr
// when it is empty and memory ran out or may not be allocated.
template <typename T>
inline T* PublishOnce(std::atomic<T*>* slot, size_t bytes, bool may_allocate) {
  T* current = slot->load(std::memory_order_acquire);
  if (current != nullptr || !may_allocate) return current;
  T* fresh = static_cast<T*>(PrivateAlloc(bytes));
  if (fresh == nullptr) return nullptr;
  if (!slot->compare_exchange_strong(current, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
    PrivateFree(fresh);  // never published: nobody else can see it
    return current;
  }
  return fresh;
}

template <int kInline, int kKeys>
Counter* SparseCounters<kInline, kKeys>::Slot(int key, bool may_allocate) {
  for (int i = 0; i < kInline; ++i) {
    uint16_t tag = tags_[i].load(std::memory_order_acquire);
    if (tag == 0) {
      // Claim the free slot; a racing writer may have claimed it first.
      if (tags_[i].compare_exchange_strong(tag, static_cast<uint16_t>(key + 1), std::memory_order_acq_rel)) {
        return &counts_[i];
      }
    }
    if (tag == key + 1) return &counts_[i];
  }
  Chunks* chunks = PublishOnce(&chunks_, sizeof(Chunks), may_allocate);
  if (chunks == nullptr) return nullptr;
  Counter* chunk = PublishOnce(&chunks->chunk[key >> kChunkBits], sizeof(Counter) * kChunkSize, may_allocate);
  return chunk == nullptr ? nullptr : &chunk[key & (kChunkSize - 1)];
}

template <int kInline, int kKeys>
void SparseCounters<kInline, kKeys>::AddAt(int key, uint64_t n, bool may_allocate) {
  Counter* slot = Slot(key, may_allocate);
  (slot != nullptr ? *slot : lost_).Add(n);
}

template <int kInline, int kKeys>
void SparseCounters<kInline, kKeys>::AddSlow(int key, uint64_t n) {
  AddAt(key, n, !t_in_private_heap);
}

template <int kInline, int kKeys>
uint64_t SparseCounters<kInline, kKeys>::Get(int key) const {
  uint64_t n = 0;
  for (int i = 0; i < kInline; ++i) {
    if (tags_[i].load(std::memory_order_acquire) == key + 1) n += counts_[i].Get();
  }
  const Chunks* chunks = chunks_.load(std::memory_order_acquire);
  const Counter* chunk = chunks ? chunks->chunk[key >> kChunkBits].load(std::memory_order_acquire) : nullptr;
  return chunk ? n + chunk[key & (kChunkSize - 1)].Get() : n;
}

template <int kInline, int kKeys>
uint64_t SparseCounters<kInline, kKeys>::Total() const {
  uint64_t n = lost_.Get();
  ForEach([&n](int, uint64_t count) { n += count; });
  return n;
}

template <int kInline, int kKeys>
void SparseCounters<kInline, kKeys>::MergeFrom(const SparseCounters& other) {
  other.ForEach([this](int key, uint64_t n) { AddAt(key, n, !t_in_private_heap); });
  lost_.Add(other.lost_.Get());
}

template <int kInline, int kKeys>
void SparseCounters<kInline, kKeys>::Reset() {
  for (int i = 0; i < kInline; ++i) {
    counts_[i].Set(0);
    tags_[i].store(0, std::memory_order_release);
  }
  lost_.Set(0);
  Chunks* chunks = chunks_.load(std::memory_order_acquire);
  for (int c = 0; chunks != nullptr && c < kChunks; ++c) {
    Counter* chunk = chunks->chunk[c].load(std::memory_order_acquire);
    for (int i = 0; chunk != nullptr && i < kChunkSize; ++i) chunk[i].Set(0);
  }
}

template <int kInline, int kKeys>
uint64_t SparseCounters<kInline, kKeys>::HeapBytes() const {
  const Chunks* chunks = chunks_.load(std::memory_order_acquire);
  if (chunks == nullptr) return 0;
  uint64_t bytes = sizeof(Chunks);
  for (int c = 0; c < kChunks; ++c) {
    if (chunks->chunk[c].load(std::memory_order_acquire) != nullptr) bytes += sizeof(Counter) * kChunkSize;
  }
  return bytes;
}


template <int kInline, int kKeys>
template <typename Fn>
void SparseCounters<kInline, kKeys>::ForEach(Fn fn) const {
  // The inline pairs, sorted by key (insertion sort of at most kInline).
  int keys[kInline];
  uint64_t counts[kInline];
  int n = 0;
  for (int i = 0; i < kInline; ++i) {
    const uint16_t tag = tags_[i].load(std::memory_order_acquire);
    const uint64_t c = counts_[i].Get();
    if (tag == 0 || c == 0) continue;
    int j = n++;
    for (; j > 0 && keys[j - 1] > tag - 1; --j) {
      keys[j] = keys[j - 1];
      counts[j] = counts[j - 1];
    }
    keys[j] = tag - 1;
    counts[j] = c;
  }
  int next = 0;
  const Chunks* chunks = chunks_.load(std::memory_order_acquire);
  for (int c = 0; chunks != nullptr && c < kChunks; ++c) {
    const Counter* chunk = chunks->chunk[c].load(std::memory_order_acquire);
    if (chunk == nullptr) continue;
    for (int i = 0; i < kChunkSize; ++i) {
      const uint64_t count = chunk[i].Get();
      if (count == 0) continue;
      const int key = (c << kChunkBits) + i;
      for (; next < n && keys[next] < key; ++next) fn(keys[next], counts[next]);
      // A key lives inline or in a chunk, never both; a racing writer of two
      // threads may have put it in both: one entry, both counts.
      if (next < n && keys[next] == key) {
        fn(key, count + counts[next++]);
      } else {
        fn(key, count);
      }
    }
  }
  for (; next < n; ++next) fn(keys[next], counts[next]);
}

}  // namespace tcpadvise

#endif  // TCPADVISE_SPARSE_COUNTERS_H_
