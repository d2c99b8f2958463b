#include "tools/json_schema/proto_json_schema.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tools/json_schema/json_schema_check.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::NotNull;
using ::testing::StartsWith;

std::string Runfile(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/psflow/tools/json_schema/",
                      name);
}

// A pool of the descriptor set's files, with their comments.
std::unique_ptr<google::protobuf::DescriptorPool> LoadPool(
    const std::string& set_name) {
  auto pool = std::make_unique<google::protobuf::DescriptorPool>();
  absl::StatusOr<std::string> bytes = ReadFileToString(Runfile(set_name));
  EXPECT_OK(bytes.status());
  google::protobuf::FileDescriptorSet set;
  EXPECT_TRUE(bytes.ok() && set.ParseFromString(*bytes));
  for (const auto& file : set.file()) {
    EXPECT_THAT(pool->BuildFile(file), NotNull()) << file.name();
  }
  return pool;
}

class ProtoJsonSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_ = LoadPool("schema_test_descriptor_set.pb");
    root_ = pool_->FindMessageTypeByName("psflow.schema_test.Everything");
    ASSERT_THAT(root_, NotNull());
    ProtoJsonSchemaOptions options;
    options.title = "Everything";
    options.note = "Generated; do not edit.";
    ASSERT_OK_AND_ASSIGN(text_, ProtoJsonSchema(*root_, options));
    ASSERT_OK_AND_ASSIGN(schema_, ParseJson(text_));
  }

  const JsonValue& Property(const std::string& name) {
    const JsonValue* p = schema_.Find("properties")->Find(name);
    EXPECT_THAT(p, NotNull()) << name;
    static const JsonValue kNull;
    return p == nullptr ? kNull : *p;
  }

  // The property's schema as compact text, without its description.
  std::string Shape(const std::string& name) {
    JsonValue::Object members;
    for (const auto& member : Property(name).object()) {
      if (member.first != "description") members.push_back(member);
    }
    return Compact(JsonValue(std::move(members)));
  }

  static std::string Compact(const JsonValue& v) {
    switch (v.kind()) {
      case JsonValue::Kind::kArray: {
        std::string out = "[";
        for (const JsonValue& e : v.array()) {
          absl::StrAppend(&out, out.size() > 1 ? "," : "", Compact(e));
        }
        return out + "]";
      }
      case JsonValue::Kind::kObject: {
        std::string out = "{";
        for (const auto& [k, e] : v.object()) {
          absl::StrAppend(&out, out.size() > 1 ? "," : "", JsonQuote(k), ":",
                          Compact(e));
        }
        return out + "}";
      }
      case JsonValue::Kind::kString:
        return JsonQuote(v.string_value());
      case JsonValue::Kind::kNumber:
        return absl::StrCat(static_cast<int64_t>(v.number_value()));
      default:
        return v.Describe();
    }
  }

  std::string Description(const std::string& name) {
    const JsonValue* d = Property(name).Find("description");
    return d == nullptr ? "" : d->string_value();
  }

  std::unique_ptr<google::protobuf::DescriptorPool> pool_;
  const google::protobuf::Descriptor* root_ = nullptr;
  std::string text_;
  JsonValue schema_;
};

TEST_F(ProtoJsonSchemaTest, TheRootIsAClosedObjectOfDraft2020) {
  EXPECT_EQ(schema_.Find("$schema")->string_value(),
            "https://json-schema.org/draft/2020-12/schema");
  EXPECT_EQ(schema_.Find("title")->string_value(), "Everything");
  EXPECT_EQ(schema_.Find("type")->string_value(), "object");
  EXPECT_FALSE(schema_.Find("additionalProperties")->bool_value());
  const JsonValue* defs = schema_.Find("$defs");
  ASSERT_THAT(defs, NotNull());
  const JsonValue* inner = defs->Find("psflow.schema_test.Everything.Inner");
  ASSERT_THAT(inner, NotNull());
  EXPECT_FALSE(inner->Find("additionalProperties")->bool_value());
  EXPECT_THAT(inner->Find("properties"), NotNull());
}

TEST_F(ProtoJsonSchemaTest, FieldsGoByEveryNameTheParserAccepts) {
  // Proto name first, its lowerCamelCase alias after.
  EXPECT_EQ(Shape("some_text"), Shape("someText"));
  EXPECT_THAT(Description("someText"), StartsWith("Same as \"some_text\"."));
  // A declared json_name is the documented name; the proto name the alias.
  EXPECT_EQ(Shape("FirstKind"), Shape("first_kind"));
  EXPECT_THAT(Description("first_kind"), StartsWith("Same as \"FirstKind\"."));
  // One word: one name.
  std::vector<std::string> names;
  for (const auto& member : schema_.Find("properties")->object()) {
    names.push_back(member.first);
  }
  EXPECT_EQ(std::count(names.begin(), names.end(), "small"), 1);
  EXPECT_EQ(names.size(), 21u + 7u);  // 7 fields have two names
}

TEST_F(ProtoJsonSchemaTest, ScalarsTakeTheirJsonForms) {
  EXPECT_EQ(Shape("small"),
            R"({"type":"integer","minimum":-2147483648,"maximum":2147483647})");
  EXPECT_EQ(Shape("unsigned_small"),
            R"({"type":"integer","minimum":0,"maximum":4294967295})");
  EXPECT_EQ(Shape("big"),
            R"({"type":["integer","string"],"pattern":"^-?[0-9]+$"})");
  EXPECT_EQ(
      Shape("unsigned_big"),
      R"({"type":["integer","string"],"minimum":0,"pattern":"^[0-9]+$"})");
  EXPECT_EQ(Shape("ratio"), R"({"type":"number"})");
  EXPECT_EQ(Shape("fraction"), R"({"type":"number"})");
  EXPECT_EQ(Shape("flag"), R"({"type":"boolean"})");
  EXPECT_EQ(Shape("blob"), R"({"type":"string","contentEncoding":"base64"})");
  EXPECT_EQ(Shape("maybe"), Shape("small"));
}

TEST_F(ProtoJsonSchemaTest, EnumsAreTheirValuesNames) {
  EXPECT_EQ(Shape("color"),
            R"({"type":"string","enum":["COLOR_UNSPECIFIED","RED","GREEN"]})");
}

TEST_F(ProtoJsonSchemaTest, RepeatedFieldsAreArraysAndMapsObjects) {
  EXPECT_EQ(Shape("sizes"),
            R"({"type":"array","items":{"type":["integer","string"],)"
            R"("pattern":"^-?[0-9]+$"}})");
  EXPECT_EQ(
      Shape("inners"),
      R"({"type":"array","items":{"$ref":"#/$defs/psflow.schema_test.Everything.Inner"}})");
  EXPECT_EQ(Shape("counts"),
            R"({"type":"object","additionalProperties":{"type":"integer",)"
            R"("minimum":-2147483648,"maximum":2147483647}})");
  EXPECT_EQ(
      Shape("by_id"),
      R"({"type":"object","propertyNames":{"pattern":"^-?[0-9]+$"},)"
      R"("additionalProperties":{"$ref":"#/$defs/psflow.schema_test.Everything.Inner"}})");
  EXPECT_EQ(Shape("by_flag"),
            R"({"type":"object","propertyNames":{"enum":["true","false"]},)"
            R"("additionalProperties":{"type":"string"}})");
}

TEST_F(ProtoJsonSchemaTest, TheRootIsReferencedAsTheDocument) {
  EXPECT_EQ(Shape("child"), R"({"$ref":"#"})");
  const JsonValue& parent = *schema_.Find("$defs")
                                 ->Find("psflow.schema_test.Everything.Inner")
                                 ->Find("properties")
                                 ->Find("parent");
  EXPECT_EQ(parent.Find("$ref")->string_value(), "#");
}

TEST_F(ProtoJsonSchemaTest, WellKnownTypesTakeTheirJsonForms) {
  EXPECT_EQ(Shape("timeout"),
            R"({"type":"string","pattern":"^-?[0-9]+(\\.[0-9]{1,9})?s$"})");
  EXPECT_EQ(Shape("wrapped"), Shape("big"));
}

TEST_F(ProtoJsonSchemaTest, CommentsBecomeDescriptions) {
  EXPECT_EQ(schema_.Find("description")->string_value(),
            "The root.\n\nA second paragraph.\n\nSet at most one of "
            "\"FirstKind\", \"second_kind\" (oneof kind).\n\nGenerated; do "
            "not edit.");
  EXPECT_EQ(Description("some_text"),
            "Several words: the parser also takes \"someText\".");
  EXPECT_EQ(Description("small"), "A trailing comment.");
  EXPECT_EQ(Description("flag"), "");
}

TEST_F(ProtoJsonSchemaTest, TheTextIsStableAndEndsInANewline) {
  ASSERT_OK_AND_ASSIGN(
      std::string again,
      ProtoJsonSchema(*root_, ProtoJsonSchemaOptions{
                                  "Everything", "Generated; do not edit."}));
  EXPECT_EQ(again, text_);
  EXPECT_EQ(text_.back(), '\n');
  EXPECT_THAT(text_, HasSubstr("\n  \"properties\": {\n    \"some_text\": {"));
}

// A value of the property's schema, for the parser to read.
std::string Sample(const JsonValue& schema) {
  if (schema.Find("$ref") != nullptr) return "{}";
  if (const JsonValue* values = schema.Find("enum")) {
    return JsonQuote(values->array().back().string_value());
  }
  const JsonValue* type = schema.Find("type");
  if (type == nullptr) return "null";  // any value
  const std::string t = type->kind() == JsonValue::Kind::kString
                            ? type->string_value()
                            : type->array()[0].string_value();
  if (t == "string") {
    const JsonValue* pattern = schema.Find("pattern");
    std::string value = pattern == nullptr ? "x" : "1.5s";
    if (schema.Find("contentEncoding") != nullptr) value = "eA==";  // "x"
    EXPECT_TRUE(pattern == nullptr ||
                std::regex_search(value, std::regex(pattern->string_value())))
        << "no sample for " << pattern->string_value();
    return JsonQuote(value);
  }
  if (t == "integer") return "1";
  if (t == "number") return "0.5";
  if (t == "boolean") return "true";
  if (t == "array") return "[]";
  return "{}";
}

// Every property of every message in `schema` is a key protobuf's JSON
// parser takes there, with a value of the property's type; and a key that
// is not a property is one it refuses.
void ExpectTheParserAgrees(const google::protobuf::DescriptorPool& pool,
                           const std::string& root, const JsonValue& schema) {
  std::vector<std::pair<std::string, const JsonValue*>> messages = {
      {root, &schema}};
  for (const auto& [name, def] : schema.Find("$defs")->object()) {
    messages.push_back({name, &def});
  }
  google::protobuf::DynamicMessageFactory factory(&pool);
  int checked = 0;
  for (const auto& [name, def] : messages) {
    const google::protobuf::Descriptor* type = pool.FindMessageTypeByName(name);
    ASSERT_THAT(type, NotNull()) << name;
    for (const auto& [property, property_schema] :
         def->Find("properties")->object()) {
      std::unique_ptr<google::protobuf::Message> message(
          factory.GetPrototype(type)->New());
      const std::string json = absl::StrCat("{", JsonQuote(property), ": ",
                                            Sample(property_schema), "}");
      EXPECT_TRUE(
          google::protobuf::util::JsonStringToMessage(json, message.get()).ok())
          << name << " refuses " << json;
      ++checked;
    }
    std::unique_ptr<google::protobuf::Message> message(
        factory.GetPrototype(type)->New());
    EXPECT_FALSE(google::protobuf::util::JsonStringToMessage(
                     R"({"not_a_field_of_it": 1})", message.get())
                     .ok())
        << name;
  }
  EXPECT_GT(checked, 20);
}

TEST_F(ProtoJsonSchemaTest, EveryPropertyIsAKeyTheParserTakes) {
  ExpectTheParserAgrees(*pool_, "psflow.schema_test.Everything", schema_);
}

TEST_F(ProtoJsonSchemaTest, ADocumentOfTheMessageFollowsItsSchema) {
  ASSERT_OK_AND_ASSIGN(
      JsonValue document,
      ParseJson(R"({"someText": "a", "big": "-9007199254740993",
                    "unsigned_big": 3, "color": "RED", "sizes": [1, "2"],
                    "inners": [{"label": "x", "parent": {"small": 1}}],
                    "counts": {"a": 1}, "by_id": {"-3": {}},
                    "by_flag": {"true": "t"}, "FirstKind": {},
                    "timeout": "2.5s", "wrapped": "7"})"));
  EXPECT_THAT(CheckAgainstSchema(document, schema_), IsEmpty());
  ASSERT_OK_AND_ASSIGN(
      JsonValue wrong,
      ParseJson(R"({"color": "BLUE", "inners": [{"lable": "x"}]})"));
  EXPECT_THAT(
      CheckAgainstSchema(wrong, schema_),
      ElementsAre(
          "$.color: is the string \"BLUE\"; expected one of "
          "\"COLOR_UNSPECIFIED\", \"RED\", \"GREEN\"",
          "$.inners[0]: has no field \"lable\" (it takes label, parent)"));
}

TEST(JobConfigSchemaTest, EveryPropertyIsAKeyTheJobConfigParserTakes) {
  std::unique_ptr<google::protobuf::DescriptorPool> pool =
      LoadPool("job_config_descriptor_set.pb");
  const google::protobuf::Descriptor* root =
      pool->FindMessageTypeByName("psflow.JobConfig");
  ASSERT_THAT(root, NotNull());
  ASSERT_OK_AND_ASSIGN(std::string text, ProtoJsonSchema(*root, {}));
  ASSERT_OK_AND_ASSIGN(JsonValue schema, ParseJson(text));
  ExpectTheParserAgrees(*pool, "psflow.JobConfig", schema);
  // Keras' class names, and "$schema" for editors.
  const JsonValue& layer =
      *schema.Find("$defs")->Find("psflow.LayerConfig")->Find("properties");
  EXPECT_THAT(layer.Find("Conv2D"), NotNull());
  EXPECT_THAT(layer.Find("conv2d"), NotNull());
  EXPECT_THAT(schema.Find("properties")->Find("$schema"), NotNull());
}

}  // namespace
}  // namespace psflow
