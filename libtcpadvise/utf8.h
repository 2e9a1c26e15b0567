// Utf8: what the shim needs so that every string it writes is valid UTF-8,
// whatever bytes a program name or a path holds.
#ifndef TCPADVISE_UTF8_H_
#define TCPADVISE_UTF8_H_

#include <stddef.h>

namespace tcpadvise {

// Utf8SequenceLength is the length (1 to 4) of the valid UTF-8 character
// that starts at s, of which at most n bytes may be read; 0 when the bytes
// there are no valid character: a stray continuation byte, an overlong form,
// a surrogate, a code point above U+10FFFF, or a sequence cut short (by n or
// by a byte that does not continue it, such as the string's NUL).
size_t Utf8SequenceLength(const unsigned char* s, size_t n);

// Utf8Cut is where to cut the len bytes at s to keep at most max of them
// without splitting a valid character: max, or the start of the character
// that straddles it (invalid bytes count one by one).
size_t Utf8Cut(const char* s, size_t len, size_t max);

}  // namespace tcpadvise

#endif  // TCPADVISE_UTF8_H_
