#include "tools/json_schema/json_schema_check.h"

#include <string>
#include <vector>

#include "common/json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A schema in the shape proto_json_schema writes.
constexpr char kSchema[] = R"({
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "t",
  "description": "d",
  "type": "object",
  "properties": {
    "name": {"type": "string", "pattern": "^[a-z]+$"},
    "count": {"type": "integer", "minimum": 0, "maximum": 10},
    "big": {"type": ["integer", "string"], "pattern": "^-?[0-9]+$"},
    "mode": {"type": "string", "enum": ["ASYNC", "SYNC"]},
    "inner": {"description": "i", "$ref": "#/$defs/Inner"},
    "inners": {"type": "array", "items": {"$ref": "#/$defs/Inner"}},
    "self": {"$ref": "#"},
    "counts": {"type": "object", "propertyNames": {"pattern": "^[0-9]+$"},
               "additionalProperties": {"type": "number"}},
    "any": {"type": "object", "properties": {"@type": {"type": "string"}},
            "required": ["@type"]}
  },
  "additionalProperties": false,
  "$defs": {
    "Inner": {"type": "object", "properties": {"label": {"type": "string"}},
              "additionalProperties": false}
  }
})";

std::vector<std::string> Check(const std::string& document,
                               const std::string& schema = kSchema) {
  absl::StatusOr<JsonValue> d = ParseJson(document);
  absl::StatusOr<JsonValue> s = ParseJson(schema);
  EXPECT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(s.ok()) << s.status();
  if (!d.ok() || !s.ok()) return {"unparsable"};
  return CheckAgainstSchema(*d, *s);
}

TEST(JsonSchemaCheckTest, AConformingDocumentHasNoProblems) {
  EXPECT_THAT(Check(R"({"name": "abc", "count": 3, "big": "-12", "mode": "SYNC",
                        "inner": {"label": "x"}, "inners": [{}, {"label": "y"}],
                        "self": {"count": 10, "self": {}},
                        "counts": {"1": 0.5}, "any": {"@type": "t", "x": 1}})"),
              IsEmpty());
}

TEST(JsonSchemaCheckTest, TypesAreChecked) {
  EXPECT_THAT(Check(R"({"name": 3, "count": 1.5, "big": true})"),
              ElementsAre("$.name: is the number 3; expected string",
                          "$.count: is the number 1.5; expected integer",
                          "$.big: is true; expected integer or string"));
}

TEST(JsonSchemaCheckTest, UnknownFieldsAreNamedWithTheirPath) {
  EXPECT_THAT(
      Check(R"({"inners": [{"label": "a"}, {"lable": "b"}], "nmae": "x"})"),
      ElementsAre("$.inners[1]: has no field \"lable\" (it takes label)",
                  "$: has no field \"nmae\" (it takes name, count, big, mode, "
                  "inner, inners, self, counts, any)"));
}

TEST(JsonSchemaCheckTest, EnumsPatternsAndRangesAreChecked) {
  EXPECT_THAT(
      Check(R"({"mode": "ASYNCH", "name": "A1", "count": 11, "big": "1e3"})"),
      ElementsAre(
          "$.mode: is the string \"ASYNCH\"; expected one of \"ASYNC\", "
          "\"SYNC\"",
          "$.name: is the string \"A1\", which does not match ^[a-z]+$",
          "$.count: is the number 11, above the maximum 10",
          "$.big: is the string \"1e3\", which does not match ^-?[0-9]+$"));
  EXPECT_THAT(Check(R"({"count": -1})"),
              ElementsAre("$.count: is the number -1, below the minimum 0"));
}

TEST(JsonSchemaCheckTest, ReferencesReachTheRootAndTheDefinitions) {
  EXPECT_THAT(Check(R"({"self": {"self": {"inner": {"label": 1}}}})"),
              ElementsAre("$.self.self.inner.label: is the number 1; expected "
                          "string"));
}

TEST(JsonSchemaCheckTest, MapKeysAndRequiredFieldsAreChecked) {
  EXPECT_THAT(Check(R"({"counts": {"x": 1, "2": "y"}, "any": {}})"),
              ElementsAre("$.counts key \"x\": is the string \"x\", which "
                          "does not match ^[0-9]+$",
                          "$.counts.2: is the string \"y\"; expected number",
                          "$.any: lacks the required field \"@type\""));
}

TEST(JsonSchemaCheckTest, AKeywordItCannotCheckIsAProblemNotAPass) {
  EXPECT_THAT(Check(R"({"a": 1})", R"({"type": "object", "minProperties": 2})"),
              ElementsAre("$: the schema's keyword \"minProperties\" is not "
                          "supported by this checker"));
  EXPECT_THAT(Check(R"(1)", R"({"$ref": "#/$defs/Missing"})"),
              ElementsAre("$: the schema's $ref \"#/$defs/Missing\" is "
                          "dangling"));
}

}  // namespace
}  // namespace psflow
