// ParseCount: the shim's numeric settings come from the environment as
// text; these read them, refusing anything but plain decimal digits within
// bounds (a sign, a suffix, an empty string).
#ifndef TCPADVISE_PARSE_COUNT_H_
#define TCPADVISE_PARSE_COUNT_H_

#include <stdint.h>
#include <stdlib.h>

namespace tcpadvise {

// ParseCount reads a count from 0 to max into *out; false (and *out as it
// was) for anything else.
inline bool ParseCount(const char* text, uint64_t max, uint64_t* out) {
  char* end = nullptr;
  const unsigned long long value = strtoull(text, &end, 10);
  if (end == text || *end != '\0' || text[0] == '-' || value > max) return false;
  *out = value;
  return true;
}

// ParsePowerOfTwo reads a power of two from 1 to max into *out; false (and
// *out as it was) for anything else.
inline bool ParsePowerOfTwo(const char* text, uint64_t max, uint64_t* out) {
  uint64_t value = 0;
  if (!ParseCount(text, max, &value) || value == 0 || (value & (value - 1)) != 0) return false;
  *out = value;
  return true;
}

}  // namespace tcpadvise

#endif  // TCPADVISE_PARSE_COUNT_H_
