// JsonWriter: builds a JSON document in a buffer from the private heap, with
// commas placed automatically. Used only when a trace is written, never on
// the hot path.
#ifndef TCPADVISE_JSON_WRITER_H_
#define TCPADVISE_JSON_WRITER_H_

#include <stddef.h>
#include <stdint.h>

namespace tcpadvise {

// JsonWriter appends JSON tokens; failed() turns true if memory ran out, and
// the document is then incomplete and must not be used.
class JsonWriter {
 public:
  JsonWriter() = default;
  ~JsonWriter();
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  // JsonWriter::BeginObject / EndObject / BeginArray / EndArray nest values.
  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // JsonWriter::Key names the next value inside an object.
  void Key(const char* key);
  // JsonWriter::String writes an escaped string.
  void String(const char* value);
  // JsonWriter::Uint, Int, Double and Bool write scalars; non-finite doubles
  // become null.
  void Uint(uint64_t value);
  void Int(int64_t value);
  void Double(double value);
  void Bool(bool value);

  const char* data() const { return buffer_; }
  size_t size() const { return size_; }
  bool failed() const { return failed_; }

 private:
  void BeforeValue();
  void Append(const char* text, size_t len);
  // AppendChar: most of a trace is single characters; room is usually there.
  void AppendChar(char c) {
    if (__builtin_expect(size_ < capacity_, 1)) {
      buffer_[size_++] = c;
    } else {
      Append(&c, 1);
    }
  }

  char* buffer_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  bool failed_ = false;
  // needs_comma_ is one bit per nesting level: whether a value was written.
  uint64_t needs_comma_ = 0;
  int depth_ = 0;
  bool after_key_ = false;
};

}  // namespace tcpadvise

#endif  // TCPADVISE_JSON_WRITER_H_
