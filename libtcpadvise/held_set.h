// HeldSet: the process-wide set of sockets whose policy holds bytes or a
// cork, which reads, waits, the exit paths and the deadline thread release.
// Lock order: a socket's turn, then the set's lock; a release copies the set
// and lets go of the set's lock before it tries any socket's turn.
#ifndef TCPADVISE_HELD_SET_H_
#define TCPADVISE_HELD_SET_H_

#include <pthread.h>
#include <sys/types.h>

#include <atomic>

#include "policy_state.h"

namespace tcpadvise {

constexpr int kMaxHeldSockets = 4096;

// g_held_count is the size of the set: the one load reads and waits pay
// when nothing is held.
extern std::atomic<int> g_held_count;
inline bool AnyHeld() { return g_held_count.load(std::memory_order_relaxed) != 0; }

// g_read_gate is true while a read must take the policies' read path:
// something is held, or every read is gated (GateEveryRead). Stored under the
// set's lock beside g_held_count, as relaxed as it, so the read hook's check
// is one load: a thread sees its own holds, and the holds of any thread
// ordered before it, exactly as through AnyHeld.
extern std::atomic<bool> g_read_gate;
inline bool ReadGated() { return g_read_gate.load(std::memory_order_relaxed); }

// GateEveryRead keeps g_read_gate set for good, held bytes or not (a loaded
// config re-arms TCP_QUICKACK after reads).
void GateEveryRead();

// HeldSetHasRoom tells whether p may start holding: a socket outside the set
// would never be released.
inline bool HeldSetHasRoom(const PolicyState* p) {
  return p->in_held_set || g_held_count.load(std::memory_order_relaxed) < kMaxHeldSockets;
}

// AddToHeldSet puts p in the set (p's turn held); false when the set is full.
bool AddToHeldSetSlow(PolicyState* p);
inline bool AddToHeldSet(PolicyState* p) { return p->in_held_set || AddToHeldSetSlow(p); }

// RemoveFromHeldSet takes p out of the set if it is there.
void RemoveFromHeldSet(PolicyState* p);

// CopyHeldSet copies the set into copy (room for kMaxHeldSockets); returns its size.
int CopyHeldSet(PolicyState** copy);

// ClearHeldSetInChild empties the set in a fork child, calling drop(p) for
// each member first; the parent sends what they hold. In the child of a
// fork from a signal handler that interrupted the set's own code in the
// forking thread (tid, its id in the parent; that code goes on when the
// handler returns), the set stays as it is and only drop(p) is called:
// each member leaves it once found empty.
void ClearHeldSetInChild(void (*drop)(PolicyState*), pid_t tid = 0);

// LockShared and UnlockShared take a lock shared by all sockets, marking the
// thread as inside the shim (InterruptedShim) meanwhile.
void LockShared(pthread_mutex_t* m);
void UnlockShared(pthread_mutex_t* m);

}  // namespace tcpadvise

#endif  // TCPADVISE_HELD_SET_H_
