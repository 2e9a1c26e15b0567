#include "held_set.h"

#include <pthread.h>

#include "process_page.h"
#include "reentry.h"

namespace tcpadvise {

std::atomic<int> g_held_count{0};
std::atomic<bool> g_read_gate{false};

namespace {

pthread_mutex_t g_set_lock = PTHREAD_MUTEX_INITIALIZER;
PolicyState* g_held_set[kMaxHeldSockets];
int g_held_set_size = 0;
// g_set_used is set before the lock is first taken: a fork child of a
// process that never held anything (observe) leaves the set's page shared.
std::atomic<bool> g_set_used{false};
// g_every_read_gated: GateEveryRead was called; under the set's lock.
bool g_every_read_gated = false;

}  // namespace

void LockShared(pthread_mutex_t* m) {
  t_in_shared = true;
  pthread_mutex_lock(m);
}

void UnlockShared(pthread_mutex_t* m) {
  pthread_mutex_unlock(m);
  t_in_shared = false;
  if (__builtin_expect(t_pending_signal != 0, 0)) RunPendingSignal();
}

bool AddToHeldSetSlow(PolicyState* p) {
  if (!g_set_used.load(std::memory_order_relaxed)) g_set_used.store(true, std::memory_order_relaxed);
  LockShared(&g_set_lock);
  if (g_held_set_size < kMaxHeldSockets) {
    g_held_set[g_held_set_size++] = p;
    p->in_held_set = true;
    g_held_count.fetch_add(1, std::memory_order_relaxed);
    g_read_gate.store(true, std::memory_order_relaxed);
  }
  UnlockShared(&g_set_lock);
  return p->in_held_set;
}

void RemoveFromHeldSet(PolicyState* p) {
  if (!p->in_held_set) return;
  LockShared(&g_set_lock);
  for (int i = 0; i < g_held_set_size; ++i) {
    if (g_held_set[i] == p) {
      g_held_set[i] = g_held_set[--g_held_set_size];
      g_held_count.fetch_sub(1, std::memory_order_relaxed);
      if (g_held_set_size == 0) g_read_gate.store(g_every_read_gated, std::memory_order_relaxed);
      break;
    }
  }
  p->in_held_set = false;
  UnlockShared(&g_set_lock);
}

void GateEveryRead() {
  LockShared(&g_set_lock);
  g_every_read_gated = true;
  g_read_gate.store(true, std::memory_order_relaxed);
  UnlockShared(&g_set_lock);
}

int CopyHeldSet(PolicyState** copy) {
  LockShared(&g_set_lock);
  const int n = g_held_set_size;
  for (int i = 0; i < n; ++i) copy[i] = g_held_set[i];
  UnlockShared(&g_set_lock);
  return n;
}

void ClearHeldSetInChild(void (*drop)(PolicyState*), pid_t tid) {
  if (!g_set_used.load(std::memory_order_relaxed)) return;
  if (tid != 0 && HeldByThread(g_set_lock, tid)) {
    for (int i = 0; i < g_held_set_size; ++i) drop(g_held_set[i]);
    return;
  }
  pthread_mutex_init(&g_set_lock, nullptr);
  for (int i = 0; i < g_held_set_size; ++i) {
    drop(g_held_set[i]);
    g_held_set[i]->in_held_set = false;
  }
  g_held_set_size = 0;
  g_held_count.store(0, std::memory_order_relaxed);
  g_read_gate.store(g_every_read_gated, std::memory_order_relaxed);
}

}  // namespace tcpadvise
