#include "utf8.h"

namespace tcpadvise {

namespace {

bool IsContinuation(unsigned char c) { return (c & 0xc0) == 0x80; }

}  // namespace

size_t Utf8SequenceLength(const unsigned char* s, size_t n) {
  if (n == 0) return 0;
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t length;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range (RFC 3629's table)
  if (c >= 0xc2 && c <= 0xdf) {
    length = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    if (c == 0xe0) low = 0xa0;   // overlong
    if (c == 0xed) high = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    if (c == 0xf0) low = 0x90;   // overlong
    if (c == 0xf4) high = 0x8f;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, 0xc0, 0xc1 or 0xf5 and above
  }
  if (n < length || s[1] < low || s[1] > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (!IsContinuation(s[i])) return 0;
  }
  return length;
}

size_t Utf8Cut(const char* s, size_t len, size_t max) {
  if (len <= max) return len;
  const unsigned char* u = reinterpret_cast<const unsigned char*>(s);
  // The character that holds byte max starts at most 3 bytes before it.
  for (size_t back = 0; back <= 3 && back <= max; ++back) {
    const size_t start = max - back;
    if (IsContinuation(u[start])) continue;
    const size_t length = Utf8SequenceLength(u + start, len - start);
    return length != 0 && start + length > max ? start : max;
  }
  return max;
}

}  // namespace tcpadvise
