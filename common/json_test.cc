#include "common/json.h"

#include <string>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;
using Kind = JsonValue::Kind;

TEST(JsonTest, ParsesEveryKind) {
  ASSERT_OK_AND_ASSIGN(
      JsonValue v,
      ParseJson(R"( {"n": null, "t": true, "f": false, "num": -12.5e1,
                     "s": "a\"b\\c\/d\n", "list": [1, [2], {}], "obj": {"k": "v"}} )"));
  ASSERT_EQ(v.kind(), Kind::kObject);
  EXPECT_TRUE(v.Find("n")->is_null());
  EXPECT_TRUE(v.Find("t")->bool_value());
  EXPECT_FALSE(v.Find("f")->bool_value());
  EXPECT_EQ(v.Find("num")->number_value(), -125.0);
  EXPECT_EQ(v.Find("s")->string_value(), "a\"b\\c/d\n");
  ASSERT_EQ(v.Find("list")->array().size(), 3u);
  EXPECT_EQ(v.Find("list")->array()[1].array()[0].number_value(), 2.0);
  EXPECT_EQ(v.Find("obj")->Find("k")->string_value(), "v");
  EXPECT_EQ(v.Find("missing"), nullptr);
}

TEST(JsonTest, KeepsMembersInDocumentOrder) {
  ASSERT_OK_AND_ASSIGN(JsonValue v, ParseJson(R"({"b": 1, "a": 2, "c": 3})"));
  ASSERT_EQ(v.object().size(), 3u);
  EXPECT_EQ(v.object()[0].first, "b");
  EXPECT_EQ(v.object()[1].first, "a");
  EXPECT_EQ(v.object()[2].first, "c");
}

TEST(JsonTest, DecodesUnicodeEscapesToUtf8) {
  ASSERT_OK_AND_ASSIGN(JsonValue v, ParseJson(R"("\u00e9\u20ac\ud83d\ude00")"));
  EXPECT_EQ(v.string_value(), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
}

TEST(JsonTest, ErrorsGiveLineAndColumn) {
  EXPECT_THAT(ParseJson("{\n  \"a\": 1,\n  \"b\" 2\n}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "line 3, column 7: expected ':' after key \"b\", got "
                       "'2'"));
}

// Bytes outside ASCII are named, not printed as half a character.
TEST(JsonTest, AByteOrderMarkAndOtherNonAsciiBytesAreNamed) {
  EXPECT_THAT(ParseJson("\xEF\xBB\xBF{}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("got a UTF-8 byte-order mark (save the file "
                                 "as UTF-8 without one)")));
  EXPECT_THAT(ParseJson("{\"a\": \xC3\xA9}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the non-ASCII byte 0xc3")));
}

TEST(JsonTest, RejectsWhatPythonsJsonModuleRejects) {
  for (const char* bad : {
           "",                // empty
           "{'a': 1}",        // single quotes
           "{\"a\": 1,}",     // trailing comma in object
           "[1, 2,]",         // trailing comma in list
           "{a: 1}",          // unquoted key
           "01",              // leading zero
           "1.",              // bare dot
           "-",               // lone minus
           "\"tab\there\"",   // raw control character
           "\"\\x41\"",       // unknown escape
           "\"\\ud800\"",     // unpaired surrogate
           "[1] [2]",         // two documents
           "{\"a\" 1}",       // missing colon
           "[1 2]",           // missing comma
           "tru",             // truncated literal
           "\"open",          // unterminated string
           "// comment\n{}",  // comments
       }) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(ParseJson(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

// absl::SimpleAtod turns an overflowing literal into infinity and calls
// it success; a config value of inf would then slip past range checks.
TEST(JsonTest, RejectsNumbersThatOverflowADouble) {
  for (const char* bad : {"1e999", "-1e999", "[0, 1e400]", "{\"a\": 1e999}"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(ParseJson(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("number out of range")));
  }
  // Underflow is not an error: the value rounds to zero, as in Python.
  ASSERT_OK_AND_ASSIGN(JsonValue tiny, ParseJson("1e-999"));
  EXPECT_EQ(tiny.number_value(), 0.0);
  ASSERT_OK_AND_ASSIGN(JsonValue big, ParseJson("1.7976931348623157e308"));
  EXPECT_EQ(big.number_value(), 1.7976931348623157e308);
}

TEST(JsonTest, RejectsDuplicateKeys) {
  EXPECT_THAT(ParseJson(R"({"a": 1, "a": 2})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("duplicate key \"a\"")));
}

TEST(JsonTest, RejectsHostileNestingWithoutOverflowingTheStack) {
  std::string deep(100000, '[');
  EXPECT_THAT(ParseJson(deep), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("nesting deeper")));
}

TEST(JsonTest, DescribesValuesForErrorMessages) {
  EXPECT_EQ(JsonValue().Describe(), "null");
  EXPECT_EQ(JsonValue(3.0).Describe(), "the number 3");
  EXPECT_EQ(JsonValue(std::string("x\"y")).Describe(), "the string \"x\\\"y\"");
  EXPECT_EQ(JsonValue(JsonValue::Array{}).Describe(), "a list");
  EXPECT_EQ(JsonValue(JsonValue::Object{}).Describe(), "an object");
}

TEST(JsonTest, QuoteRoundTripsThroughTheParser) {
  const std::string text = "quote\" backslash\\ newline\n tab\t bell\x07 end";
  ASSERT_OK_AND_ASSIGN(JsonValue v, ParseJson(JsonQuote(text)));
  EXPECT_EQ(v.string_value(), text);
}

}  // namespace
}  // namespace psflow
