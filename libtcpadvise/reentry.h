// Reentry: whether this thread is inside a part of the shim that holds a lock
// (the socket table's, the private heap's). A hook entered then can only be a
// signal handler that interrupted it: it passes the call through without
// bookkeeping rather than wait on a lock its own thread holds.
#ifndef TCPADVISE_REENTRY_H_
#define TCPADVISE_REENTRY_H_

namespace tcpadvise {

// t_shim_depth counts the lock-holding sections this thread is inside.
extern __thread int t_shim_depth;

// ShimSection marks such a section for its scope.
class ShimSection {
 public:
  ShimSection() { ++t_shim_depth; }
  ~ShimSection() { --t_shim_depth; }
  ShimSection(const ShimSection&) = delete;
  ShimSection& operator=(const ShimSection&) = delete;
};

// Reentered tells a hook that it interrupted such a section.
inline bool Reentered() { return t_shim_depth != 0; }

}  // namespace tcpadvise

#endif  // TCPADVISE_REENTRY_H_
