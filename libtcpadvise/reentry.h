// Reentry: whether this thread is inside a part of the shim that holds a lock
// (the socket table's, the private heap's). A hook entered then can only be a
// signal handler that interrupted it: it passes the call through without
// bookkeeping rather than wait on a lock its own thread holds.
#ifndef TCPADVISE_REENTRY_H_
#define TCPADVISE_REENTRY_H_

namespace tcpadvise {

// t_shim_depth counts the lock-holding sections this thread is inside.
extern __thread int t_shim_depth;

// t_pending_signal is a stop signal that interrupted this thread inside such
// a section (signals.h); RunPendingSignal, called where the last section
// ends, writes the final trace and dies of it.
extern __thread int t_pending_signal;
void RunPendingSignal();

// t_app_signal_depth counts the program's signal handlers this thread is
// running (signals.h runs them through a trampoline that counts). A hook
// called from one may have interrupted the program inside libc, holding
// one of libc's locks (malloc's, the loader's): it must not call what may
// take one (start a thread, unwind the stack).
extern __thread int t_app_signal_depth;
inline bool InApplicationSignalHandler() { return t_app_signal_depth != 0; }

// EnterShimSection and LeaveShimSection bracket a section.
inline void EnterShimSection() { ++t_shim_depth; }
inline void LeaveShimSection() {
  if (--t_shim_depth == 0 && __builtin_expect(t_pending_signal != 0, 0)) RunPendingSignal();
}

// ShimSection marks such a section for its scope.
class ShimSection {
 public:
  ShimSection() { EnterShimSection(); }
  ~ShimSection() { LeaveShimSection(); }
  ShimSection(const ShimSection&) = delete;
  ShimSection& operator=(const ShimSection&) = delete;
};

// Reentered tells a hook that it interrupted such a section.
inline bool Reentered() { return t_shim_depth != 0; }

}  // namespace tcpadvise

#endif  // TCPADVISE_REENTRY_H_
