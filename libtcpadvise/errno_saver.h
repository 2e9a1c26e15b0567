// ErrnoSaver: keeps the application's errno intact across the shim's own
// bookkeeping, so a wrapped call reports exactly what libc reported.
#ifndef TCPADVISE_ERRNO_SAVER_H_
#define TCPADVISE_ERRNO_SAVER_H_

#include <errno.h>

namespace tcpadvise {

// ErrnoSaver restores errno to its value at construction when it goes out of
// scope. Only if it changed: errno shares its page with the rest of libc's
// thread data, which a fork-per-connection server's parent otherwise leaves
// alone after a fork; a store there made every connection copy that page.
class ErrnoSaver {
 public:
  [[gnu::always_inline]] ErrnoSaver() : saved_(errno) {}
  // Inline: out of line, the compare made it a function of its own, on a
  // page of text a fork child then faulted in for it.
  [[gnu::always_inline]] ~ErrnoSaver() {
    if (errno != saved_) errno = saved_;
  }
  ErrnoSaver(const ErrnoSaver&) = delete;
  ErrnoSaver& operator=(const ErrnoSaver&) = delete;

 private:
  int saved_;
};

}  // namespace tcpadvise

#endif  // TCPADVISE_ERRNO_SAVER_H_
