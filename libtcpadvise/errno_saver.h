// ErrnoSaver: keeps the application's errno intact across the shim's own
// bookkeeping, so a wrapped call reports exactly what libc reported.
#ifndef TCPADVISE_ERRNO_SAVER_H_
#define TCPADVISE_ERRNO_SAVER_H_

#include <errno.h>

namespace tcpadvise {

// ErrnoSaver restores errno to its value at construction when it goes out of scope.
class ErrnoSaver {
 public:
  ErrnoSaver() : saved_(errno) {}
  ~ErrnoSaver() { errno = saved_; }
  ErrnoSaver(const ErrnoSaver&) = delete;
  ErrnoSaver& operator=(const ErrnoSaver&) = delete;

 private:
  int saved_;
};

}  // namespace tcpadvise

#endif  // TCPADVISE_ERRNO_SAVER_H_
