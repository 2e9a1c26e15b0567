#include "json_writer.h"

#include <gtest/gtest.h>

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

TEST(JsonWriterTest, EscapesStringsAndNonFiniteNumbers) {
  JsonWriter w;
  w.BeginArray();
  w.String("q\"b\\\n");
  w.Double(1.0 / 0.0);
  w.EndArray();
  EXPECT_EQ(Text(w), R"(["q\"b\\\u000a",null])");
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
