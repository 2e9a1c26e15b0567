// JsonWriter: builds a JSON document in a buffer the caller lends it, then
// (once that is full) in one from the private heap, with commas placed
// automatically. Used only when a trace is written, never on
// the hot path.
#ifndef TCPADVISE_JSON_WRITER_H_
#define TCPADVISE_JSON_WRITER_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

namespace tcpadvise {

// JsonWriter appends JSON tokens; failed() turns true if memory ran out, and
// the document is then incomplete and must not be used.
// FormatDouble writes value into out (size >= 32) as a JSON number that
// reads back as exactly value: the fewest significant digits from 15 to 17
// that do, '.' as the decimal point whatever the locale; a non-finite value
// as the nearest finite one (NaN as 0). Returns the length.
size_t FormatDouble(double value, char* out, size_t size);

// RoundToFifteenDigits is value rounded to 15 significant digits (as it is
// outside 1e-4 to 1e15), which FormatDouble then writes without printf.
double RoundToFifteenDigits(double value);

class JsonWriter {
 public:
  JsonWriter() = default;
  // JsonWriter(initial, capacity) writes into initial until it is full; with
  // a spare buffer, it then moves what it wrote there, and to the heap only
  // when that is full too.
  JsonWriter(char* initial, size_t capacity, char* spare = nullptr, size_t spare_capacity = 0)
      : buffer_(initial), capacity_(capacity), owned_(false), spare_(spare), spare_capacity_(spare_capacity) {}
  ~JsonWriter();
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  // JsonWriter::BeginObject / EndObject / BeginArray / EndArray nest values.
  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // JsonWriter::Key names the next value inside an object. A literal's
  // length is known where it is compiled and it is copied as it is, not
  // scanned for characters to escape: the shim's keys are plain names (a
  // trace holds some 500; scanning them was a third of a forked server's
  // child's trace), and a literal that needed an escape would be written
  // without it. A key that is not a literal is KeyString's.
  template <size_t N>
  void Key(const char (&key)[N]) {
    static_assert(N > 1, "a key is not empty");
    PlainKey(key, N - 1);
  }
  // A char array that is not a literal (a buffer) is no key of known length.
  template <size_t N>
  void Key(char (&key)[N]) = delete;
  // JsonWriter::KeyString names the next value with any string, escaped as
  // String escapes it.
  void KeyString(const char* key);
  // JsonWriter::String writes value as a JSON string that is always valid
  // UTF-8: valid characters as they are, '"', '\\', C0 and C1 controls and
  // DEL as JSON escapes, and each byte that is part of no valid UTF-8
  // character as the four characters \xNN (lower-case hex, as Python's
  // "backslashreplace" error handler writes it).
  void String(const char* value);
  // JsonWriter::Uint, Int, Double and Bool write scalars. A double is
  // written in the fewest digits that read back as exactly that double
  // (FormatDouble); a non-finite one, which the shim's own figures never
  // are, is written as the nearest finite (NaN as 0) so that the document
  // stays valid JSON.
  void Uint(uint64_t value);
  void Int(int64_t value);
  void Double(double value);
  void Bool(bool value);
  // JsonWriter::Whole writes value rounded to the nearest whole number as an
  // integer (to_chars, no printf), clamped to [0, 2^64 - 1]: for figures
  // whose fractions mean nothing, such as times in ns converted from clock
  // ticks.
  void Whole(double value);

  const char* data() const { return buffer_; }
  size_t size() const { return size_; }
  bool failed() const { return failed_; }

 private:
  // BeforeValue writes the comma that separates this value from the last.
  void BeforeValue() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    const uint64_t bit = uint64_t{1} << (depth_ & 63);
    if (needs_comma_ & bit) AppendChar(',');
    needs_comma_ |= bit;
  }
  // Append copies text; the buffer grows out of line.
  void Append(const char* text, size_t len) {
    if (__builtin_expect(size_ + len <= capacity_, 1)) {
      memcpy(buffer_ + size_, text, len);
      size_ += len;
    } else {
      AppendGrowing(text, len);
    }
  }
  [[gnu::cold]] void AppendGrowing(const char* text, size_t len);
  // PlainKey writes a key of length bytes that needs no escape, out of line:
  // inline at each of the shim's some 170 literal keys, it grew the code a
  // forked server's child runs to write its trace by a third.
  void PlainKey(const char* key, size_t length);
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
  bool owned_ = true;  // buffer_ is the private heap's
  char* spare_ = nullptr;  // where the text goes when the lent buffer is full
  size_t spare_capacity_ = 0;
  // The last double written and its text: a trace writes its histograms'
  // scale (ns per clock tick) over and over.
  double last_double_ = 0;
  char last_double_text_[40];
  size_t last_double_length_ = 0;
  // needs_comma_ is one bit per nesting level: whether a value was written.
  uint64_t needs_comma_ = 0;
  int depth_ = 0;
  bool after_key_ = false;
};

}  // namespace tcpadvise

#endif  // TCPADVISE_JSON_WRITER_H_
