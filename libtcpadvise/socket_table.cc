#include "socket_table.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <new>

#include "call_sites.h"
#include "clock.h"
#include "experiment.h"
#include "policy.h"
#include "runtime.h"
#include "private_alloc.h"

namespace tcpadvise {

SocketTable g_table;
SocketTable::Local SocketTable::local_;
__thread int t_shim_depth = 0;

// kMaxTableSize caps the slots at 8 MiB of the heap (taken, not written:
// the heap's fresh pages); fds above it are not tracked.
constexpr unsigned kMaxTableSize = 1u << 20;
constexpr unsigned kMinTableSize = 1024;

void SocketTable::Init() {
  rlimit limit;
  unsigned size = kMaxTableSize;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_max != RLIM_INFINITY && limit.rlim_max < size) {
    size = static_cast<unsigned>(limit.rlim_max);
  }
  if (size < kMinTableSize) size = kMinTableSize;
  capacity_ = size;
}

// StartWithFirstSocket takes the slots, with room for the table's entries
// (private_alloc.h: TableStart; zeroed, untouched pages, not a memset), and
// has Local wiped in fork children; the mutex is held.
bool SocketTable::StartWithFirstSocket() {
  if (slots_end_ == nullptr) {
    auto* slots = static_cast<std::atomic<SocketState*>*>(TableStart(capacity_ * sizeof(slots_end_[0])));
    if (slots == nullptr) return false;
    slots_end_ = slots + capacity_;
    size_.store(capacity_, std::memory_order_release);
  }
  local_wiped_.store(madvise(&local_, sizeof(Local), MADV_WIPEONFORK) == 0, std::memory_order_relaxed);
  local_started_ = true;
  return true;
}

SocketState* SocketTable::NewEntry() {
  if (local_.free_list != nullptr) {
    SocketState* s = local_.free_list;
    local_.free_list = s->next_free;
    s->ResetForReuse();
    return s;
  }
  return TableNew<SocketState>();
}

SocketState* SocketTable::Track(int fd, const SocketIdentity& id) {
  const unsigned index = static_cast<unsigned>(fd);
  if (index >= capacity_) return nullptr;
  if (Reentered()) return nullptr;
  Lock();
  if (!local_started_ && !StartWithFirstSocket()) {
    Unlock();
    return nullptr;
  }
  SocketState* stale = Slot(index).load(std::memory_order_relaxed);
  if (stale != nullptr) {  // the app closed it behind our back
    Slot(index).store(nullptr, std::memory_order_release);
    Retire(fd, stale, false, EBADF);
  }
  SocketState* s = NewEntry();
  if (s != nullptr) {
    s->id = id;
    s->refs = 1;
    s->connections = 1;
    s->owner = ProcessToken();
    s->opened_ticks = ReadTicks();
    if (index > max_tracked_fd_.load(std::memory_order_relaxed)) max_tracked_fd_.store(index, std::memory_order_relaxed);
  }
  Slot(index).store(s, std::memory_order_release);
  Unlock();
  return s;
}

void SocketTable::Alias(int new_fd, SocketState* entry) {
  const unsigned index = static_cast<unsigned>(new_fd);
  if (index >= size_.load(std::memory_order_relaxed)) return;
  if (Reentered()) return;
  Lock();
  SocketState* old = Slot(index).load(std::memory_order_relaxed);
  if (old != entry) {
    if (old != nullptr) {
      Slot(index).store(nullptr, std::memory_order_release);
      Retire(new_fd, old, false, EBADF);
    }
    ++entry->refs;
    if (index > max_tracked_fd_.load(std::memory_order_relaxed)) max_tracked_fd_.store(index, std::memory_order_relaxed);
    Slot(index).store(entry, std::memory_order_release);
  }
  Unlock();
}

void SocketTable::Forget(int fd, bool fd_is_live, int gone_errno) {
  const unsigned index = static_cast<unsigned>(fd);
  if (index >= size_.load(std::memory_order_relaxed)) return;
  if (Reentered()) return;
  Lock();
  SocketState* s = Slot(index).load(std::memory_order_relaxed);
  if (s != nullptr) {
    Slot(index).store(nullptr, std::memory_order_release);
    Retire(fd, s, fd_is_live, gone_errno);
  }
  Unlock();
}

void SocketTable::Release(int fd) { Forget(fd, true, ETIMEDOUT); }

void SocketTable::ReleaseReplaced(int fd) { Forget(fd, false, ETIMEDOUT); }

void SocketTable::ForgetStale(int fd) { Forget(fd, false, EBADF); }

void SocketTable::CaptureKernelState(int fd) {
  if (Reentered()) return;
  Lock();
  SocketState* s = Lookup(fd);
  if (s != nullptr) s->ReadKernelState(fd);
  Unlock();
}

void SocketTable::ReleaseRange(unsigned first, unsigned last) {
  const unsigned end = max_tracked_fd_.load(std::memory_order_relaxed);
  if (last > end) last = end;
  for (unsigned fd = first; fd <= last; ++fd) {
    // Lookup: the slots come with size_, published by another thread's first socket maybe.
    if (Lookup(static_cast<int>(fd)) != nullptr) Release(static_cast<int>(fd));
  }
}

// Retire drops fd's reference (fd's slot already cleared); the last one
// ends the socket's policy (what it still holds counts as a deferred
// gone_errno), reads the kernel's final figures through fd when it is still
// the socket's, and folds the socket into its group. The mutex is held.
void SocketTable::Retire(int fd, SocketState* s, bool fd_is_live, int gone_errno) {
  // A socket a fork child inherited and closes without having used it (a
  // server's listener, in the child that serves one connection) has nothing
  // to count, fold or flush: its entry stays as it is, shared with the
  // parent, off the free list (writing either would copy a page in every
  // such child).
  if (s->refs == 1 && s->policy_state == nullptr && s->Inherited() && !s->stats.Recorded()) return;
  if (--s->refs > 0) {
    PolicyFdClosed(s, fd, OtherFdOf(s));
    return;
  }
  PolicySocketGone(s, gone_errno);
  // A socket this process never read or wrote and did not connect (a fork
  // parent's copy of a connection its child serves, a child's inherited
  // listener) has no figures of its own: its seven getsockopt calls would
  // sit on the accept loop of a fork-per-connection server.
  if (fd_is_live && (s->stats.Active() || s->id.role == Role::kClient)) s->ReadKernelState(fd);
  if (s->stats.burst_open_writes.Get() != 0) s->CloseBurst();
  s->lifetime_ticks = ReadTicks() - s->opened_ticks;
  // A fork parent closing its copy of a connection the child serves did not
  // take part: only connections this process used count.
  if (g_policy_config != nullptr && g_policy_config->experiment.enabled && s->id.rule >= 0 && s->stats.Active()) {
    const int arm = ArmOfRule(g_policy_config->experiment, s->id.rule);
    if (arm >= 0) {
      OnExperimentConnectionClosed(g_policy_config->experiment, arm, *s, ReadTicks(),
                                   1e9 / g_runtime.tick_rate.TicksPerSecond());
    }
  }
  if (s->WorthReporting()) FoldIntoGroup(s);
  s->next_free = local_.free_list;
  local_.free_list = s;
}

int SocketTable::OtherFdOf(const SocketState* s) const {
  const unsigned end = max_tracked_fd_.load(std::memory_order_relaxed) + 1;
  for (unsigned fd = 0; fd < end; ++fd) {
    if (Slot(fd).load(std::memory_order_relaxed) == s) return static_cast<int>(fd);
  }
  return -1;
}

// FoldIntoGroup adds a closed socket to its group. The key is the identity
// (role, policy rule, family, service port, peer address), the socket's
// shape (ShapeOf: unused, write-only, read-only or request-response, and the
// class of its median write size) and whether a fork parent handed it over:
// connections whose patterns differ never average each other away (iperf3's
// control and data connections), a listener's unused copy of a connection a
// fork child serves stays apart from the connections it served itself, and
// a child's inherited connections stay apart from those it accepted.
void SocketTable::FoldIntoGroup(SocketState* closed) {
  closed->id.shape = ShapeOf(closed->stats);
  const bool inherited = closed->Inherited();
  const uint64_t hash = closed->id.GroupHash() ^ (inherited ? 0x9e3779b97f4a7c15ull : 0);
  const int capacity = kMaxGroups * 2;
  for (int i = 0; i < capacity; ++i) {
    SocketState*& slot = local_.groups[(hash + static_cast<uint64_t>(i)) % capacity];
    if (slot != nullptr && slot->Inherited() == inherited && slot->id.SameGroup(closed->id)) {
      slot->MergeFrom(*closed);
      CallSitesFold(closed->id.cookie, slot);
      return;
    }
    if (slot == nullptr) {
      if (local_.group_count >= kMaxGroups) break;
      slot = NewGroupEntry();
      if (slot == nullptr) return;
      ++local_.group_count;
      slot->MergeFrom(*closed);
      CallSitesFold(closed->id.cookie, slot);
      return;
    }
  }
  if (local_.overflow_group == nullptr) local_.overflow_group = NewGroupEntry();
  if (local_.overflow_group == nullptr) return;
  ++local_.groups_dropped;
  local_.overflow_group->MergeFrom(*closed);
  CallSitesFold(closed->id.cookie, local_.overflow_group);
}

SocketState* SocketTable::NewGroupEntry() {
  if (local_.group_entries_taken > kMaxGroups) return nullptr;
  void* p = &local_.group_entries[static_cast<size_t>(local_.group_entries_taken++) * sizeof(SocketState)];
  g_process_page.table_grouped = true;
  return new (p) SocketState();
}

void SocketTable::LetWaitersIn() {
  ProcessPage& page = g_process_page;
  const int waiting = page.table_waiting.load(std::memory_order_relaxed);
  if (waiting == 0) return;
  // Those waiting now, not those that come while they have their turn.
  const uint64_t served = page.table_acquired.load(std::memory_order_relaxed) + static_cast<uint64_t>(waiting);
  pthread_mutex_unlock(&page.table_mutex);
  for (int i = 0; i < 1000 && page.table_acquired.load(std::memory_order_relaxed) < served; ++i) sched_yield();
  pthread_mutex_lock(&page.table_mutex);
}

void SocketTable::ResetInChild() {
  // The fork happened under Lock (BeforeFork): the lock is the process
  // page's, free in the child.
  t_shim_depth = 0;
  const unsigned end = max_tracked_fd_.load(std::memory_order_relaxed) + 1;
  for (unsigned fd = 0; fd < end && slots_end_ != nullptr; ++fd) {
    SocketState* s = Slot(fd).load(std::memory_order_relaxed);
    if (s == nullptr) continue;
    if (s->stats.Recorded()) {
      s->stats.Reset();
      s->turns_recorded.Set(0);
    }
    if (s->policy_state != nullptr) ResetPolicyInChild(s->policy_state);
  }
  if (local_started_ && !local_wiped_.load(std::memory_order_relaxed)) ForgetGroupsAndFreeEntries();
  ResetExperimentInChild();
}

bool SocketTable::KeepLocalOnFork() { return KeepWipedOnFork(&local_wiped_, &local_, sizeof(Local)); }

void SocketTable::WipeLocalAgainAfterFork(bool kept) { WipeAgainAfterFork(&local_wiped_, kept, &local_, sizeof(Local)); }

void SocketTable::ForgetGroupsAndFreeEntries() {
  // The entries taken, not the whole of Local.
  const size_t taken = static_cast<size_t>(local_.group_entries_taken);
  const size_t used = offsetof(Local, group_entries) + taken * sizeof(SocketState);
  memset(static_cast<void*>(&local_), 0, used);
}

}  // namespace tcpadvise
