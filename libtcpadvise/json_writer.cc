#include "json_writer.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <charconv>

#include "private_alloc.h"
#include "utf8.h"

namespace tcpadvise {

JsonWriter::~JsonWriter() {
  if (owned_) PrivateFree(buffer_);
}

void JsonWriter::AppendGrowing(const char* text, size_t len) {
  if (failed_) return;
  char* const spare = spare_;
  spare_ = nullptr;  // used once: the text never moves back to a smaller buffer
  if (spare != nullptr && size_ + len <= spare_capacity_) {
    memcpy(spare, buffer_, size_);
    buffer_ = spare;
    capacity_ = spare_capacity_;
  } else {
    size_t capacity = capacity_ ? capacity_ * 2 : 16384;
    while (capacity < size_ + len) capacity *= 2;
    char* grown = static_cast<char*>(owned_ ? PrivateRealloc(buffer_, capacity) : PrivateAlloc(capacity));
    if (grown == nullptr) {
      failed_ = true;
      capacity_ = size_;  // nothing more is written: every Append comes here
      return;
    }
    if (!owned_) {
      memcpy(grown, buffer_, size_);
      owned_ = true;
    }
    buffer_ = grown;
    capacity_ = capacity;
  }
  memcpy(buffer_ + size_, text, len);
  size_ += len;
}

void JsonWriter::BeginObject() {
  BeforeValue();
  AppendChar('{');
  ++depth_;
  needs_comma_ &= ~(uint64_t{1} << (depth_ & 63));
}

void JsonWriter::EndObject() {
  --depth_;
  AppendChar('}');
}

void JsonWriter::BeginArray() {
  BeforeValue();
  AppendChar('[');
  ++depth_;
  needs_comma_ &= ~(uint64_t{1} << (depth_ & 63));
}

void JsonWriter::EndArray() {
  --depth_;
  AppendChar(']');
}

void JsonWriter::PlainKey(const char* key, size_t length) {
  if (__builtin_expect(after_key_ || size_ + length + 4 > capacity_, 0)) return KeyString(key);
  const uint64_t bit = uint64_t{1} << (depth_ & 63);
  char* out = buffer_ + size_;
  if (needs_comma_ & bit) *out++ = ',';
  needs_comma_ |= bit;
  *out++ = '"';
  memcpy(out, key, length);
  out += length;
  *out++ = '"';
  *out++ = ':';
  size_ = static_cast<size_t>(out - buffer_);
  after_key_ = true;
}

void JsonWriter::KeyString(const char* key) {
  String(key);
  AppendChar(':');
  after_key_ = true;
}

namespace {

// kPlain flags the bytes a JSON string holds as they are: printable ASCII
// but '"' and '\\'. String skips runs of them a table load a byte.
struct PlainBytes {
  bool plain[256];
  constexpr PlainBytes() : plain() {
    for (int c = 0x20; c < 0x7f; ++c) plain[c] = c != '"' && c != '\\';
  }
};
constexpr PlainBytes kPlain;

}  // namespace

void JsonWriter::String(const char* value) {
  BeforeValue();
  AppendChar('"');
  const char* run = value;  // characters that need no escape go in one piece
  const unsigned char* p = reinterpret_cast<const unsigned char*>(value);
  for (;;) {
    while (kPlain.plain[*p]) ++p;
    const unsigned char c = *p;
    size_t length = c >= 0x80 ? Utf8SequenceLength(p, 4) : 1;
    // Valid characters from U+00A0 up go as they are (C1 controls escaped).
    if (length > 1 && !(c == 0xc2 && p[1] < 0xa0)) {
      p += length;
      continue;
    }
    Append(run, static_cast<size_t>(reinterpret_cast<const char*>(p) - run));
    if (c == '\0') break;
    char escaped[8];
    if (c == '"' || c == '\\') {
      escaped[0] = '\\';
      escaped[1] = static_cast<char>(c);
      Append(escaped, 2);
    } else if (length == 0) {
      // A byte of no valid character: the text \xNN (Python's backslashreplace).
      snprintf(escaped, sizeof(escaped), "\\\\x%02x", c);
      Append(escaped, 5);
      length = 1;
    } else {
      const unsigned code = length == 2 ? p[1] : c;  // C0 controls, DEL, C1 controls (U+0080-U+009F)
      snprintf(escaped, sizeof(escaped), "\\u%04x", code);
      Append(escaped, 6);
    }
    p += length;
    run = reinterpret_cast<const char*>(p);
  }
  AppendChar('"');
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  if (value < 10) {  // most of a quiet socket's figures are 0
    AppendChar(static_cast<char>('0' + value));
    return;
  }
  char text[24];
  // to_chars: the digits printf("%llu") gives, without a format to parse
  // (a trace holds thousands of numbers; a forked server's child writes one
  // at every exit).
  Append(text, static_cast<size_t>(std::to_chars(text, text + sizeof(text), value).ptr - text));
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  char text[24];
  Append(text, static_cast<size_t>(std::to_chars(text, text + sizeof(text), value).ptr - text));
}

namespace {

// kPowersOfTen are exact doubles (10^22 is the last).
constexpr double kPowersOfTen[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// FifteenDigits finds D, value's 15 significant digits, and k, with
// |value| * 10^k rounded to D (1e14 <= D < 1e15), for 1e-4 <= |value| < 1e15
// (the values printf's %.15g writes without an exponent); false otherwise.
bool FifteenDigits(double value, uint64_t* digits, int* k) {
  const double a = value < 0 ? -value : value;
  if (!(a >= 1e-4 && a < 1e15)) return false;
  int point = 15;  // digits before the decimal point: 10^(point - 1) <= a
  while (point > 0 && a < kPowersOfTen[point - 1]) --point;
  *k = 15 - point;
  if (point == 0) {  // a < 1: one more for each zero after the point
    while (*k < 18 && a * kPowersOfTen[*k - 14] < 1) ++*k;
  }
  *digits = static_cast<uint64_t>(a * kPowersOfTen[*k] + 0.5);
  if (*digits >= 1000000000000000ull && *k > 0) {  // rounded up to 16 digits
    --*k;
    *digits = static_cast<uint64_t>(a * kPowersOfTen[*k] + 0.5);
  }
  return *digits >= 100000000000000ull && *digits < 1000000000000000ull;
}

// FormatFifteenDigits writes value as printf's %.15g does, without printf
// (which formats with multi-precision arithmetic in a large stack frame: a
// forked child's trace paid some pages of stack for it), when those 15
// digits read back exactly and need no exponent; returns 0 otherwise. D
// read back is D / 10^k, rounded once (both are exact doubles: D < 2^53,
// k <= 22), as strtod rounds.
size_t FormatFifteenDigits(double value, char* out) {
  uint64_t digits = 0;
  int k = 0;
  if (!FifteenDigits(value, &digits, &k)) return 0;
  if (static_cast<double>(digits) / kPowersOfTen[k] != (value < 0 ? -value : value)) return 0;
  char text[16];
  std::to_chars(text, text + sizeof(text), digits);
  const int before = 15 - k;  // digits before the point; 0 or less: "0.", -before zeros, the digits
  int last = 14;              // the last digit written: zeros that end the fraction are not
  while (last >= before && text[last] == '0') --last;
  size_t n = 0;
  if (value < 0) out[n++] = '-';
  if (before <= 0) {
    out[n++] = '0';
    out[n++] = '.';
    for (int i = before; i < 0; ++i) out[n++] = '0';
  }
  for (int i = 0; i <= last; ++i) {
    if (i == before && before > 0) out[n++] = '.';
    out[n++] = text[i];
  }
  out[n] = '\0';
  return n;
}

}  // namespace

size_t FormatDouble(double value, char* out, size_t size) {
  if (isnan(value)) value = 0;
  if (isinf(value)) value = value > 0 ? DBL_MAX : -DBL_MAX;
  // A whole number under 10^15 prints as its digits with %.15g too, and reads back exactly.
  if (value > -1e15 && value < 1e15 && value == static_cast<double>(static_cast<int64_t>(value)) &&
      !(value == 0 && signbit(value)) && size >= 24) {
    const size_t n = static_cast<size_t>(std::to_chars(out, out + size - 1, static_cast<int64_t>(value)).ptr - out);
    out[n] = '\0';
    return n;
  }
  if (size >= 24) {
    if (const size_t n = FormatFifteenDigits(value, out)) return n;
  }
  // The fewest significant digits from 15 up that read back as value: 17
  // always do; most of the shim's figures need 15 or 16.
  int n = 0;
  for (int digits = 15; digits <= 17; ++digits) {
    n = snprintf(out, size, "%.*g", digits, value);
    if (strtod(out, nullptr) == value) break;
  }
  // The program's locale may have set another decimal point (LC_NUMERIC):
  // JSON's is '.'. Only digits, the sign, the exponent and it are printed.
  size_t kept = 0;
  bool in_point = false;
  for (int i = 0; i < n; ++i) {
    const char c = out[i];
    const bool number_char = (c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e';
    if (!number_char && in_point) continue;
    in_point = !number_char;
    out[kept++] = number_char ? c : '.';
  }
  out[kept] = '\0';
  return kept;
}

double RoundToFifteenDigits(double value) {
  uint64_t digits = 0;
  int k = 0;
  if (!FifteenDigits(value, &digits, &k)) return value;
  const double rounded = static_cast<double>(digits) / kPowersOfTen[k];
  return value < 0 ? -rounded : rounded;
}

void JsonWriter::Double(double value) {
  BeforeValue();
  // Bit for bit the same double (memcmp: -0.0 is not 0.0) prints the same.
  if (last_double_length_ == 0 || memcmp(&value, &last_double_, sizeof(value)) != 0) {
    last_double_ = value;
    last_double_length_ = FormatDouble(value, last_double_text_, sizeof(last_double_text_));
  }
  Append(last_double_text_, last_double_length_);
}

void JsonWriter::Whole(double value) {
  // NaN and negatives as 0; 2^64 and above as 2^64 - 1.
  const uint64_t whole = !(value > 0) ? 0 : value >= 18446744073709551616.0 ? UINT64_MAX : static_cast<uint64_t>(value + 0.5);
  Uint(whole);
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  if (value) {
    Append("true", 4);
  } else {
    Append("false", 5);
  }
}

}  // namespace tcpadvise
