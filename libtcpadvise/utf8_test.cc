#include "utf8.h"

#include <gtest/gtest.h>

#include <string.h>

namespace tcpadvise {
namespace {

size_t Length(const char* s) { return Utf8SequenceLength(reinterpret_cast<const unsigned char*>(s), strlen(s)); }

TEST(Utf8Test, SequenceLengthsOfValidAndInvalidCharacters) {
  EXPECT_EQ(Length("a"), 1u);
  EXPECT_EQ(Length("\xc3\xa9"), 2u);
  EXPECT_EQ(Length("\xe2\x82\xac"), 3u);
  EXPECT_EQ(Length("\xf0\x9f\x98\x80"), 4u);
  EXPECT_EQ(Length("\xf4\x8f\xbf\xbf"), 4u);  // U+10FFFF
  EXPECT_EQ(Length("\x80"), 0u);              // a stray continuation byte
  EXPECT_EQ(Length("\xc1\xbf"), 0u);          // overlong
  EXPECT_EQ(Length("\xe0\x9f\xbf"), 0u);      // overlong
  EXPECT_EQ(Length("\xed\xbf\xbf"), 0u);      // a surrogate
  EXPECT_EQ(Length("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(Length("\xf5\x80\x80\x80"), 0u);
  EXPECT_EQ(Length("\xe2\x82"), 0u);  // cut short by the NUL
  EXPECT_EQ(Utf8SequenceLength(reinterpret_cast<const unsigned char*>("\xe2\x82\xac"), 2), 0u);  // ... or by n
}

TEST(Utf8Test, CutsNeverSplitACharacter) {
  const char* s = "ab\xc3\xa9" "cd\xe2\x82\xac";  // a b é c d €: bytes 0 1 2-3 4 5 6-8
  const size_t len = strlen(s);
  EXPECT_EQ(Utf8Cut(s, len, 100), len);
  EXPECT_EQ(Utf8Cut(s, len, 2), 2u);
  EXPECT_EQ(Utf8Cut(s, len, 3), 2u);  // inside é
  EXPECT_EQ(Utf8Cut(s, len, 4), 4u);
  EXPECT_EQ(Utf8Cut(s, len, 7), 6u);  // inside €
  EXPECT_EQ(Utf8Cut(s, len, 8), 6u);
  EXPECT_EQ(Utf8Cut(s, len, 9), 9u);
  EXPECT_EQ(Utf8Cut("\xc3\xa9", 2, 1), 0u);
  // Invalid bytes are one "character" each: a cut may fall between them.
  EXPECT_EQ(Utf8Cut("a\x80\x80\x80\x80", 5, 3), 3u);
  EXPECT_EQ(Utf8Cut("\xe2\x82" "z", 3, 1), 1u);
}

}  // namespace
}  // namespace tcpadvise
