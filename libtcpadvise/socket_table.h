// SocketTable: per-fd state in a flat fd-indexed array, looked up without a
// lock; a fd we do not track costs one bounds-checked read. Entries are
// created and retired under one mutex on the slow paths (socket, accept,
// close, dup), never freed while the process runs (a racing reader may touch
// a recycled entry, never freed memory), and folded into groups on close so
// memory stays bounded however many connections come and go.
#ifndef TCPADVISE_SOCKET_TABLE_H_
#define TCPADVISE_SOCKET_TABLE_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <atomic>

#include "process_page.h"
#include "reentry.h"
#include "socket_state.h"

namespace tcpadvise {

// kMaxGroups bounds the group table; closed sockets past it share one
// overflow group, counted in the trace.
constexpr int kMaxGroups = 1024;

// SocketTable maps fds to SocketState entries.
class SocketTable {
 public:
  // SocketTable::Init sizes the table from RLIMIT_NOFILE's hard limit
  // (capped). Its slots come from the table's arena with the first socket (a
  // process that tracks none has none), in the arena's mapping rather than
  // one of their own: each mapping costs every fork and exit of the process
  // (bench/fork_child_costs.c, vmas).
  void Init();

  // SocketTable::Lookup returns the entry for fd, or nullptr.
  SocketState* Lookup(int fd) const {
    const unsigned index = static_cast<unsigned>(fd);
    if (index >= size_.load(std::memory_order_acquire)) return nullptr;
    return Slot(index).load(std::memory_order_acquire);
  }

  // SocketTable::MaxTrackedFd is the highest fd ever tracked.
  unsigned MaxTrackedFd() const { return max_tracked_fd_.load(std::memory_order_relaxed); }

  // SocketTable::Covers tells whether fd fits in the table.
  bool Covers(int fd) const { return static_cast<unsigned>(fd) < capacity_; }

  // SocketTable::Track starts tracking fd with a new entry (replacing any
  // stale one, left by a close the shim did not see); nullptr if fd is out of range or memory ran out.
  SocketState* Track(int fd, const SocketIdentity& id);

  // SocketTable::Alias makes new_fd refer to the same socket as entry (dup).
  void Alias(int new_fd, SocketState* entry);

  // SocketTable::Release forgets fd; when it was the socket's last fd, reads
  // the kernel's final figures through fd (still open: call this before the
  // real close) and folds the socket into its group.
  void Release(int fd);

  // SocketTable::ReleaseReplaced forgets fd after dup2 or dup3 put another
  // file on it: the old socket's final figures were read by CaptureKernelState.
  void ReleaseReplaced(int fd);

  // SocketTable::ForgetStale forgets fd after a close the shim did not see
  // (fd already refers to something else): what a policy held for the old
  // socket is dropped as a deferred EBADF.
  void ForgetStale(int fd);

  // SocketTable::CaptureKernelState reads tcp_info and the effective options
  // of fd's socket into its entry.
  void CaptureKernelState(int fd);

  // SocketTable::ReleaseRange releases every tracked fd in [first, last].
  void ReleaseRange(unsigned first, unsigned last);

  // SocketTable::ForEachLive calls fn(fd, entry) for each fd's entry (an
  // entry with several fds is visited once) with the mutex held. fn may call
  // LetWaitersIn: each fd's slot is read when its turn comes.
  template <typename Fn>
  void ForEachLive(Fn fn);

  // SocketTable::ForEachGroup calls fn(group) with the mutex held.
  template <typename Fn>
  void ForEachGroup(Fn fn);

  // SocketTable::Lock and Unlock guard a consistent view (trace writing, fork).
  // While it is held, hooks entered on the same thread (signal handlers)
  // pass through (reentry.h); a stale entry is retired when its fd is reused.
  // The lock is the process's (ProcessPage): a fork child's is free.
  void Lock() {
    EnterShimSection();
    g_process_page.table_waiting.fetch_add(1, std::memory_order_relaxed);
    pthread_mutex_lock(&g_process_page.table_mutex);
    g_process_page.table_waiting.fetch_sub(1, std::memory_order_relaxed);
    g_process_page.table_acquired.fetch_add(1, std::memory_order_relaxed);
  }
  void Unlock() {
    pthread_mutex_unlock(&g_process_page.table_mutex);
    LeaveShimSection();
  }

  // SocketTable::LetWaitersIn, called with the mutex held, lets the threads
  // waiting for it then take it in turn (waiting at most about a thousand
  // yields), then takes it back; free when none waits. A long holder (a snapshot of thousands of
  // sockets) calls it between pieces of work: a mutex released and retaken
  // at once would mostly go back to the same thread.
  void LetWaitersIn();

  // SocketTable::ResetInChild runs in a fork child: the child keeps the
  // sockets it inherited, starts its own statistics from zero and has no
  // group (its group pages came zeroed). It writes only the entries the
  // parent recorded something in: a fork-per-connection server's parent
  // only accepted the connection its child serves.
  void ResetInChild();

  // SocketTable::KeepLocalOnFork and WipeLocalAgainAfterFork: Local copied
  // into the child of a fork from inside the shim (process_page.h:
  // KeepWipedOnFork).
  bool KeepLocalOnFork();
  void WipeLocalAgainAfterFork(bool kept);

  // SocketTable::ForgetGroupsAndFreeEntries empties the group table and the
  // free list, leaving their entries as they are (a test's new table, and a
  // fork child whose kernel does not zero them).
  void ForgetGroupsAndFreeEntries();

  // SocketTable::groups_dropped counts closed sockets that went to the
  // overflow group.
  uint64_t groups_dropped() const { return g_process_page.table_grouped ? local_.groups_dropped : 0; }

 private:
  SocketState* NewEntry();
  void Forget(int fd, bool fd_is_live, int gone_errno);
  int OtherFdOf(const SocketState* s) const;
  void Retire(int fd, SocketState* entry, bool fd_is_live, int gone_errno);
  void FoldIntoGroup(SocketState* entry);

  // Local is what the table keeps for this process alone: the closed
  // sockets' groups (table and entries) and the free entries, in pages that
  // each fork child starts zeroed (MADV_WIPEONFORK from the first socket on,
  // else ResetInChild zeroes them). The parent's closes and folds after a
  // fork copy none of them; the child reads none of its parent's groups and
  // takes none of its free entries (they stay, unused, shared with the
  // parent). Group entries are taken in order and never freed; only those
  // taken are ever written. One for the process (a table made by a test
  // shares it: ForgetGroupsAndFreeEntries), in the shim's zeroed data right
  // before the process page (preload/child_layout.ld), wiped as it is: the
  // two are one mapping, where Local was one more of its own.
  struct alignas(4096) Local {
    SocketState* groups[kMaxGroups * 2];  // open addressing, half full at most
    int group_count;
    SocketState* overflow_group;
    uint64_t groups_dropped;
    SocketState* free_list;  // linked through SocketState::next_free
    int group_entries_taken;
    alignas(SocketState) unsigned char group_entries[(kMaxGroups + 1) * sizeof(SocketState)];
  };
  SocketState* NewGroupEntry();
  bool StartWithFirstSocket();

  // Slot is fd's slot. The slots run down from slots_end_, the lowest fds'
  // last, where they share a page with the table's first entries
  // (table_arena.h).
  std::atomic<SocketState*>& Slot(unsigned index) const { return slots_end_[-1 - static_cast<ptrdiff_t>(index)]; }

  unsigned capacity_ = 0;                   // fds the table may hold (Init)
  std::atomic<unsigned> size_{0};           // fds it holds: 0 until the slots exist
  std::atomic<SocketState*>* slots_end_ = nullptr;
  std::atomic<unsigned> max_tracked_fd_{0};
  bool local_started_ = false;  // Local is in use (the first socket came)
  std::atomic<bool> local_wiped_{false};  // and the kernel wipes it in fork children
  static Local local_;
};

template <typename Fn>
void SocketTable::ForEachLive(Fn fn) {
  const unsigned end = max_tracked_fd_.load(std::memory_order_relaxed) + 1;
  for (unsigned fd = 0; fd < end && slots_end_ != nullptr; ++fd) {
    SocketState* s = Slot(fd).load(std::memory_order_relaxed);
    if (s == nullptr) continue;
    // A dup'd socket is visited at its lowest fd only.
    bool seen = false;
    for (unsigned other = 0; other < fd && s->refs > 1 && !seen; ++other) {
      seen = Slot(other).load(std::memory_order_relaxed) == s;
    }
    if (!seen) fn(static_cast<int>(fd), s);
  }
}

template <typename Fn>
void SocketTable::ForEachGroup(Fn fn) {
  // A process that folded no group (a fork child's trace) reads none of
  // Local's pages; then only as far as the last group.
  if (!g_process_page.table_grouped) return;
  int left = local_.group_count;
  for (int i = 0; left > 0 && i < kMaxGroups * 2; ++i) {
    if (SocketState* g = local_.groups[i]) {
      --left;
      fn(g);
    }
  }
  if (local_.overflow_group != nullptr) fn(local_.overflow_group);
}

// g_table is the process's socket table.
extern SocketTable g_table;

}  // namespace tcpadvise

#endif  // TCPADVISE_SOCKET_TABLE_H_
