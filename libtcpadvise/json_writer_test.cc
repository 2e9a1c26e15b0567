#include "json_writer.h"

#include <gtest/gtest.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <random>
#include <string>

namespace tcpadvise {
namespace {

std::string Text(const JsonWriter& w) { return std::string(w.data(), w.size()); }

TEST(JsonWriterTest, NestsWithCommas) {
  JsonWriter w;
  w.BeginObject();
  w.Key("a");
  w.Uint(1);
  w.Key("b");
  w.BeginArray();
  w.Int(-2);
  w.Bool(true);
  w.BeginObject();
  w.EndObject();
  w.EndArray();
  w.Key("c");
  w.Double(0.5);
  w.EndObject();
  ASSERT_FALSE(w.failed());
  EXPECT_EQ(Text(w), R"({"a":1,"b":[-2,true,{}],"c":0.5})");
}

TEST(JsonWriterTest, WritesInALentBufferThenMovesToTheHeapWhenItIsFull) {
  char lent[8];
  memset(lent, 'x', sizeof(lent));
  JsonWriter w(lent, 4);
  w.BeginArray();
  w.Uint(12);
  ASSERT_EQ(w.data(), lent);  // "[12" fits
  w.String("a string longer than the lent buffer");
  w.EndArray();
  ASSERT_FALSE(w.failed());
  EXPECT_NE(w.data(), lent);
  EXPECT_EQ(Text(w), R"([12,"a string longer than the lent buffer"])");
  EXPECT_EQ(std::string(lent, 8), "[12,xxxx");  // written up to its capacity, never beyond
}

// The trace writer's two buffers (the process page's tail, then a static
// one): the text moves to the spare when the first is full, then to the heap.
TEST(JsonWriterTest, MovesToTheSpareBufferBeforeTheHeap) {
  char lent[8], spare[24];
  memset(lent, 'x', sizeof(lent));
  memset(spare, 'x', sizeof(spare));
  JsonWriter w(lent, 4, spare, 20);
  w.BeginArray();
  w.Uint(12);
  ASSERT_EQ(w.data(), lent);  // "[12" fits
  w.String("in spare");
  ASSERT_EQ(w.data(), spare);
  EXPECT_EQ(std::string(spare, 14), R"([12,"in spare")");
  w.String("beyond the spare too");
  w.EndArray();
  ASSERT_FALSE(w.failed());
  EXPECT_NE(w.data(), spare);
  EXPECT_NE(w.data(), lent);
  EXPECT_EQ(Text(w), R"([12,"in spare","beyond the spare too"])");
  EXPECT_EQ(std::string(spare + 20, 4), "xxxx");  // never beyond its capacity
  // Text that outgrows both at once goes straight to the heap.
  JsonWriter big(lent, 4, spare, 20);
  big.String("a string longer than either buffer");
  EXPECT_EQ(Text(big), R"("a string longer than either buffer")");
}

TEST(JsonWriterTest, ALiteralKeyIsWrittenAsKeyStringWritesIt) {
  const char* const by_pointer[] = {"first", "second_key", "k"};
  char lent[64];
  memset(lent, 'x', sizeof(lent));
  // 19 bytes: the second literal key finds no room left and moves to the heap.
  JsonWriter literal(lent, 19), pointer;
  for (JsonWriter* w : {&literal, &pointer}) {
    w->BeginObject();
    w == &literal ? w->Key("first") : w->KeyString(by_pointer[0]);
    w->Uint(1);
    w == &literal ? w->Key("second_key") : w->KeyString(by_pointer[1]);
    w->BeginObject();
    w == &literal ? w->Key("k") : w->KeyString(by_pointer[2]);
    w->Bool(false);
    w->EndObject();
    w->EndObject();
    ASSERT_FALSE(w->failed());
  }
  EXPECT_NE(literal.data(), lent);
  EXPECT_EQ(Text(literal), R"({"first":1,"second_key":{"k":false}})");
  EXPECT_EQ(Text(pointer), Text(literal));
  EXPECT_EQ(std::string(lent, 20), R"({"first":1,"xxxxxxxx)");  // never beyond its capacity
}

TEST(JsonWriterTest, WholeRoundsToTheNearestIntegerWithinZeroTo2To64) {
  JsonWriter w;
  w.BeginArray();
  for (const double v : {0.0, 0.49, 0.5, 1234.4999, 1234.5, 3e9 + 0.7, -5.0, double{NAN}, 1e30, 18446744073709549568.0}) {
    w.Whole(v);
  }
  w.EndArray();
  ASSERT_FALSE(w.failed());
  EXPECT_EQ(Text(w), "[0,0,1,1234,1235,3000000001,0,0,18446744073709551615,18446744073709549568]");
}

TEST(JsonWriterTest, ARepeatedDoubleIsWrittenTheSame) {
  JsonWriter w;
  w.BeginArray();
  for (const double v : {0.3448275862068966, 0.3448275862068966, 2.5, 0.3448275862068966, 0.0, -0.0, 0.0}) {
    w.Double(v);
  }
  w.EndArray();
  ASSERT_FALSE(w.failed());
  EXPECT_EQ(Text(w), "[0.3448275862068966,0.3448275862068966,2.5,0.3448275862068966,0,-0,0]");
}

TEST(JsonWriterTest, EscapesStringsAndWritesNonFiniteNumbersAsFiniteOnes) {
  JsonWriter w;
  w.BeginArray();
  w.String("q\"b\\\n");
  w.Double(1.0 / 0.0);
  w.Double(-1.0 / 0.0);
  w.Double(nan(""));
  w.EndArray();
  EXPECT_EQ(Text(w), R"(["q\"b\\\u000a",1.7976931348623157e+308,-1.7976931348623157e+308,0])");
}

TEST(JsonWriterTest, StringsAreAlwaysValidUtf8WithInvalidBytesEscapedAsBackslashX) {
  const struct {
    const char* in;
    const char* out;
  } cases[] = {
      {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},  // kept as they are
      {"a\xff" "b", R"("a\\xffb")"},                                // a byte of no character
      {"\xc3", R"("\\xc3")"},                                       // a character cut short by the end
      {"\xe2\x82" "z", R"("\\xe2\\x82z")"},                       // ... or by a byte that does not continue it
      {"\xc0\x80", R"("\\xc0\\x80")"},                            // overlong NUL
      {"\xed\xa0\x80", R"("\\xed\\xa0\\x80")"},                  // a surrogate
      {"\xf4\x90\x80\x80", R"("\\xf4\\x90\\x80\\x80")"},        // above U+10FFFF
      {"\x1b[31mred\x7f\xc2\x9b", R"("\u001b[31mred\u007f\u009b")"},  // C0, DEL and C1 controls
      {"back\\xff", R"("back\\xff")"},  // a real backslash is escaped as JSON's \\ (so \xNN is ambiguous only to a reader that unescapes twice)
  };
  for (const auto& c : cases) {
    JsonWriter w;
    w.String(c.in);
    EXPECT_EQ(Text(w), c.out);
  }
}

TEST(JsonWriterTest, DoublesReadBackExactlyInTheFewestDigits) {
  const struct {
    double value;
    const char* text;
  } cases[] = {{0.5, "0.5"}, {0.1, "0.1"}, {1e9 / 3e9, "0.3333333333333333"}, {2999999999.9999995, "2999999999.9999995"},
               {123456789012.0, "123456789012"}, {-0.0, "-0"}, {5e-324, "4.94065645841247e-324"}};
  for (const auto& c : cases) {
    char text[40];
    FormatDouble(c.value, text, sizeof(text));
    EXPECT_STREQ(text, c.text);
  }
  std::mt19937_64 random(17);
  for (int i = 0; i < 100000; ++i) {
    uint64_t bits = random();
    double value;
    memcpy(&value, &bits, sizeof(value));
    if (!std::isfinite(value)) continue;
    char text[40];
    FormatDouble(value, text, sizeof(text));
    ASSERT_EQ(strtod(text, nullptr), value) << text;
  }
}

// Values from 1e-4 to 1e15 whose 15 significant digits read back exactly
// take a path of their own, without printf: the same text as printf's.
TEST(JsonWriterTest, FifteenDigitValuesPrintAsPrintfDoes) {
  std::mt19937_64 random(41);
  int fifteen = 0;
  for (int i = 0; i < 300000; ++i) {
    // Random doubles from 1e-5 to 1e16, half of them with few digits (x.yz, as averages often are).
    const double exponent = static_cast<double>(random() % 2100) / 100.0 - 5.0;
    double value = pow(10.0, exponent) * (i % 2 ? 1 : -1);
    if (i % 4 < 2) value = round(value * 1000.0) / 1000.0;
    char text[40], expected[40];
    FormatDouble(value, text, sizeof(text));
    int digits = 15;
    for (; digits <= 17; ++digits) {
      snprintf(expected, sizeof(expected), "%.*g", digits, value);
      if (strtod(expected, nullptr) == value) break;
    }
    fifteen += digits == 15;
    ASSERT_STREQ(text, expected) << value;
  }
  EXPECT_GT(fifteen, 100000);  // the path was taken
  const struct {
    double value;
    const char* text;
  } cases[] = {{0.0001, "0.0001"}, {0.00012345, "0.00012345"}, {0.1, "0.1"}, {0.5, "0.5"}, {-2.5, "-2.5"},
               {0.3448275862, "0.3448275862"}, {2899999.75, "2899999.75"}, {99999999999999.9, "99999999999999.9"},
               {999999999999999.9, "999999999999999.9"}, {47.333, "47.333"}};
  for (const auto& c : cases) {
    char text[40];
    FormatDouble(c.value, text, sizeof(text));
    EXPECT_STREQ(text, c.text);
  }
}

TEST(JsonWriterTest, AValueRoundedToFifteenDigitsPrintsInThem) {
  std::mt19937_64 random(43);
  for (int i = 0; i < 100000; ++i) {
    const double value = 1e9 / static_cast<double>(random() % 4000000000ull + 1);  // ns per tick
    const double rounded = RoundToFifteenDigits(value);
    ASSERT_LE(fabs(rounded - value), value * 1e-14);
    char text[40];
    FormatDouble(rounded, text, sizeof(text));
    ASSERT_EQ(strtod(text, nullptr), rounded) << text;
    size_t digits = 0;  // significant digits: leading zeros are not
    for (const char* p = text; *p != '\0'; ++p) digits += *p >= '0' && *p <= '9' && (digits > 0 || *p != '0');
    ASSERT_LE(digits, 15u) << text;
  }
  EXPECT_EQ(RoundToFifteenDigits(5e-5), 5e-5);  // out of its range: as it is
  EXPECT_EQ(RoundToFifteenDigits(-2.5), -2.5);
}

// Whole numbers and integers take a path of their own (to_chars): the same
// text as printf's, which the other values still get.
TEST(JsonWriterTest, WholeNumbersAndIntegersPrintAsPrintfDoes) {
  std::mt19937_64 random(29);
  for (int i = 0; i < 100000; ++i) {
    const int64_t whole = static_cast<int64_t>(random() >> (random() % 64)) * (i % 2 ? 1 : -1);
    const double value = static_cast<double>(whole);
    char text[40], expected[40];
    FormatDouble(value, text, sizeof(text));
    for (int digits = 15; digits <= 17; ++digits) {
      snprintf(expected, sizeof(expected), "%.*g", digits, value);
      if (strtod(expected, nullptr) == value) break;
    }
    ASSERT_STREQ(text, expected);
    JsonWriter w;
    w.Int(whole);
    snprintf(expected, sizeof(expected), "%lld", static_cast<long long>(whole));
    ASSERT_EQ(Text(w), expected);
    JsonWriter u;
    u.Uint(static_cast<uint64_t>(whole));
    snprintf(expected, sizeof(expected), "%llu", static_cast<unsigned long long>(whole));
    ASSERT_EQ(Text(u), expected);
  }
}

TEST(JsonWriterTest, DoublesUseAPointWhateverTheLocale) {
  if (setlocale(LC_NUMERIC, "de_DE.UTF-8") == nullptr && setlocale(LC_NUMERIC, "fr_FR.UTF-8") == nullptr) {
    GTEST_SKIP() << "no locale with a decimal comma is installed";
  }
  char text[40];
  FormatDouble(2.5, text, sizeof(text));
  setlocale(LC_NUMERIC, "C");
  EXPECT_STREQ(text, "2.5");
}

TEST(JsonWriterTest, GrowsPastItsFirstBuffer) {
  JsonWriter w;
  w.BeginArray();
  for (int i = 0; i < 10000; ++i) w.Uint(123456789);
  w.EndArray();
  ASSERT_FALSE(w.failed());
  EXPECT_EQ(w.size(), 2 + 10000 * 9 + 9999u);
}

}  // namespace
}  // namespace tcpadvise
