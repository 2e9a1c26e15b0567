#include "json_writer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "private_alloc.h"

namespace tcpadvise {

JsonWriter::~JsonWriter() { PrivateFree(buffer_); }

void JsonWriter::Append(const char* text, size_t len) {
  if (failed_) return;
  if (size_ + len > capacity_) {
    size_t capacity = capacity_ ? capacity_ * 2 : 16384;
    while (capacity < size_ + len) capacity *= 2;
    char* grown = static_cast<char*>(PrivateRealloc(buffer_, capacity));
    if (grown == nullptr) {
      failed_ = true;
      return;
    }
    buffer_ = grown;
    capacity_ = capacity;
  }
  memcpy(buffer_ + size_, text, len);
  size_ += len;
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  const uint64_t bit = uint64_t{1} << (depth_ & 63);
  if (needs_comma_ & bit) AppendChar(',');
  needs_comma_ |= bit;
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

void JsonWriter::Key(const char* key) {
  String(key);
  AppendChar(':');
  after_key_ = true;
}

void JsonWriter::String(const char* value) {
  BeforeValue();
  AppendChar('"');
  const char* run = value;  // characters that need no escape go in one piece
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(value);; ++p) {
    if (*p != '\0' && *p != '"' && *p != '\\' && *p >= 0x20) continue;
    Append(run, static_cast<size_t>(reinterpret_cast<const char*>(p) - run));
    if (*p == '\0') break;
    if (*p == '"' || *p == '\\') {
      const char escaped[2] = {'\\', static_cast<char>(*p)};
      Append(escaped, 2);
    } else {
      char escaped[8];
      snprintf(escaped, sizeof(escaped), "\\u%04x", *p);
      Append(escaped, 6);
    }
    run = reinterpret_cast<const char*>(p) + 1;
  }
  AppendChar('"');
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  char text[24];
  const int n = snprintf(text, sizeof(text), "%llu", static_cast<unsigned long long>(value));
  Append(text, static_cast<size_t>(n));
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  char text[24];
  const int n = snprintf(text, sizeof(text), "%lld", static_cast<long long>(value));
  Append(text, static_cast<size_t>(n));
}

void JsonWriter::Double(double value) {
  BeforeValue();
  if (!isfinite(value)) {
    Append("null", 4);
    return;
  }
  char text[32];
  const int n = snprintf(text, sizeof(text), "%.6g", value);
  Append(text, static_cast<size_t>(n));
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
