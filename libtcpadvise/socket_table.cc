#include "socket_table.h"

#include <errno.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "call_sites.h"
#include "clock.h"
#include "experiment.h"
#include "policy.h"
#include "runtime.h"
#include "private_alloc.h"

namespace tcpadvise {

SocketTable g_table;
__thread int t_shim_depth = 0;

// kMaxTableSize caps the table at 8 MiB of address space; fds above it are
// not tracked.
constexpr unsigned kMaxTableSize = 1u << 20;
constexpr unsigned kMinTableSize = 1024;

bool SocketTable::Init() {
  rlimit limit;
  unsigned size = kMaxTableSize;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_max != RLIM_INFINITY && limit.rlim_max < size) {
    size = static_cast<unsigned>(limit.rlim_max);
  }
  if (size < kMinTableSize) size = kMinTableSize;
  void* p = mmap(nullptr, size * sizeof(slots_[0]), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return false;
  slots_ = static_cast<std::atomic<SocketState*>*>(p);
  size_.store(size, std::memory_order_release);
  return true;
}

SocketState* SocketTable::NewEntry() {
  if (free_list_ != nullptr) {
    SocketState* s = free_list_;
    free_list_ = s->next_free;
    s->ResetForReuse();
    return s;
  }
  return PrivateNew<SocketState>();
}

SocketState* SocketTable::Track(int fd, const SocketIdentity& id) {
  const unsigned index = static_cast<unsigned>(fd);
  if (index >= size_.load(std::memory_order_relaxed)) return nullptr;
  if (Reentered()) return nullptr;
  Lock();
  SocketState* stale = slots_[index].load(std::memory_order_relaxed);
  if (stale != nullptr) {  // the app closed it behind our back
    slots_[index].store(nullptr, std::memory_order_release);
    Retire(fd, stale, false, EBADF);
  }
  SocketState* s = NewEntry();
  if (s != nullptr) {
    s->id = id;
    s->refs = 1;
    s->connections = 1;
    s->opened_ticks = ReadTicks();
    if (index > max_tracked_fd_.load(std::memory_order_relaxed)) max_tracked_fd_.store(index, std::memory_order_relaxed);
  }
  slots_[index].store(s, std::memory_order_release);
  Unlock();
  return s;
}

void SocketTable::Alias(int new_fd, SocketState* entry) {
  const unsigned index = static_cast<unsigned>(new_fd);
  if (index >= size_.load(std::memory_order_relaxed)) return;
  if (Reentered()) return;
  Lock();
  SocketState* old = slots_[index].load(std::memory_order_relaxed);
  if (old != entry) {
    if (old != nullptr) {
      slots_[index].store(nullptr, std::memory_order_release);
      Retire(new_fd, old, false, EBADF);
    }
    ++entry->refs;
    if (index > max_tracked_fd_.load(std::memory_order_relaxed)) max_tracked_fd_.store(index, std::memory_order_relaxed);
    slots_[index].store(entry, std::memory_order_release);
  }
  Unlock();
}

void SocketTable::Forget(int fd, bool fd_is_live, int gone_errno) {
  const unsigned index = static_cast<unsigned>(fd);
  if (index >= size_.load(std::memory_order_relaxed)) return;
  if (Reentered()) return;
  Lock();
  SocketState* s = slots_[index].load(std::memory_order_relaxed);
  if (s != nullptr) {
    slots_[index].store(nullptr, std::memory_order_release);
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
    if (slots_ != nullptr && slots_[fd].load(std::memory_order_relaxed) != nullptr) Release(static_cast<int>(fd));
  }
}

// Retire drops fd's reference (fd's slot already cleared); the last one
// ends the socket's policy (what it still holds counts as a deferred
// gone_errno), reads the kernel's final figures through fd when it is still
// the socket's, and folds the socket into its group. The mutex is held.
void SocketTable::Retire(int fd, SocketState* s, bool fd_is_live, int gone_errno) {
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
  s->next_free = free_list_;
  free_list_ = s;
}

int SocketTable::OtherFdOf(const SocketState* s) const {
  const unsigned end = max_tracked_fd_.load(std::memory_order_relaxed) + 1;
  for (unsigned fd = 0; fd < end; ++fd) {
    if (slots_[fd].load(std::memory_order_relaxed) == s) return static_cast<int>(fd);
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
  const uint64_t hash = closed->id.GroupHash() ^ (closed->inherited ? 0x9e3779b97f4a7c15ull : 0);
  const int capacity = kMaxGroups * 2;
  for (int i = 0; i < capacity; ++i) {
    SocketState*& slot = groups_[(hash + static_cast<uint64_t>(i)) % capacity];
    if (slot != nullptr && slot->inherited == closed->inherited && slot->id.SameGroup(closed->id)) {
      slot->MergeFrom(*closed);
      CallSitesFold(closed->id.cookie, slot);
      return;
    }
    if (slot == nullptr) {
      if (group_count_ >= kMaxGroups) break;
      slot = NewEntry();
      if (slot == nullptr) return;
      ++group_count_;
      slot->MergeFrom(*closed);
      CallSitesFold(closed->id.cookie, slot);
      return;
    }
  }
  if (overflow_group_ == nullptr) overflow_group_ = NewEntry();
  if (overflow_group_ == nullptr) return;
  ++groups_dropped_;
  overflow_group_->MergeFrom(*closed);
  CallSitesFold(closed->id.cookie, overflow_group_);
}

void SocketTable::LetWaitersIn() {
  const int waiting = waiting_.load(std::memory_order_relaxed);
  if (waiting == 0) return;
  // Those waiting now, not those that come while they have their turn.
  const uint64_t served = acquired_.load(std::memory_order_relaxed) + static_cast<uint64_t>(waiting);
  pthread_mutex_unlock(&mutex_);
  for (int i = 0; i < 1000 && acquired_.load(std::memory_order_relaxed) < served; ++i) sched_yield();
  pthread_mutex_lock(&mutex_);
}

void SocketTable::ResetInChild() {
  // The fork happened under Lock (BeforeFork): the child starts unlocked.
  pthread_mutex_init(&mutex_, nullptr);
  waiting_.store(0, std::memory_order_relaxed);
  t_shim_depth = 0;
  const unsigned end = max_tracked_fd_.load(std::memory_order_relaxed) + 1;
  for (unsigned fd = 0; fd < end && slots_ != nullptr; ++fd) {
    SocketState* s = slots_[fd].load(std::memory_order_relaxed);
    if (s == nullptr) continue;
    s->stats.Reset();
    s->turns_recorded.Set(0);
    s->inherited = true;
    if (s->policy_state != nullptr) ResetPolicyInChild(s->policy_state);
  }
  // The group table is 16 KiB: a child reads only as far as its last group.
  int groups_left = group_count_;
  for (SocketState*& g : groups_) {
    if (groups_left == 0) break;
    if (g == nullptr) continue;
    --groups_left;
    g->next_free = free_list_;
    free_list_ = g;
    g = nullptr;
  }
  if (overflow_group_ != nullptr) {
    overflow_group_->next_free = free_list_;
    free_list_ = overflow_group_;
    overflow_group_ = nullptr;
  }
  group_count_ = 0;
  groups_dropped_ = 0;
  ResetExperimentInChild();
}

}  // namespace tcpadvise
