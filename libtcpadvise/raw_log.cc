#include "raw_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errno_saver.h"
#include "real_libc.h"

namespace tcpadvise {

void RawWarning(const char* format, ...) {
  ErrnoSaver errno_saver;
  char line[512];
  static const char kPrefix[] = "tcpadvise: warning: ";
  memcpy(line, kPrefix, sizeof(kPrefix) - 1);
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(line + sizeof(kPrefix) - 1, sizeof(line) - sizeof(kPrefix), format, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = sizeof(kPrefix) - 1 + static_cast<size_t>(n);
  if (len > sizeof(line) - 2) len = sizeof(line) - 2;
  line[len++] = '\n';
  (void)LibcWrite(2, line, len);
}

}  // namespace tcpadvise
