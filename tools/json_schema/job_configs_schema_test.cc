// The shipped job configs against the checked-in schema that editors read
// (configs/job_config.schema.json): every config follows it, and it
// refuses the mistakes the parser refuses.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/json_schema/json_schema_check.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::string ConfigsDir() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/psflow/configs");
}

JsonValue Schema() {
  absl::StatusOr<std::string> text =
      ReadFileToString(ConfigsDir() + "/job_config.schema.json");
  EXPECT_OK(text.status());
  absl::StatusOr<JsonValue> schema = ParseJson(text.ok() ? *text : "");
  EXPECT_OK(schema.status());
  return schema.ok() ? *schema : JsonValue();
}

// The problems the schema finds in the config `name` after replacing
// `from` (which must occur) by `to`.
std::vector<std::string> ProblemsOfEdited(const std::string& name,
                                          const std::string& from,
                                          const std::string& to) {
  absl::StatusOr<std::string> text =
      ReadFileToString(absl::StrCat(ConfigsDir(), "/", name));
  EXPECT_OK(text.status());
  if (!text.ok()) return {};
  const size_t at = text->find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at == std::string::npos) return {};
  text->replace(at, from.size(), to);
  absl::StatusOr<JsonValue> document = ParseJson(*text);
  EXPECT_OK(document.status());
  return document.ok() ? CheckAgainstSchema(*document, Schema())
                       : std::vector<std::string>{};
}

TEST(JobConfigsSchemaTest, EveryShippedConfigFollowsTheSchema) {
  const JsonValue schema = Schema();
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names,
                       ListDirectory(ConfigsDir()));
  int checked = 0;
  for (const std::string& name : names) {
    if (!absl::EndsWith(name, ".json") ||
        absl::EndsWith(name, ".schema.json")) {
      continue;
    }
    ASSERT_OK_AND_ASSIGN(std::string text,
                         ReadFileToString(ConfigsDir() + "/" + name));
    ASSERT_OK_AND_ASSIGN(JsonValue config, ParseJson(text));
    EXPECT_THAT(CheckAgainstSchema(config, schema), IsEmpty()) << name;
    ++checked;
  }
  // fashion_mnist_mlp, fashion_mnist_convnet, ctr_wide_deep at least.
  EXPECT_GE(checked, 3);
}

TEST(JobConfigsSchemaTest, AnUnknownFieldIsRefusedWhereItIs) {
  const std::vector<std::string> problems = ProblemsOfEdited(
      "fashion_mnist_mlp.json", "\"hidden_sizes\"", "\"hiden_sizes\"");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(problems[0],
                               "$.model.mlp: has no field \"hiden_sizes\""))
      << problems[0];
}

TEST(JobConfigsSchemaTest, AValueOfTheWrongTypeIsRefused) {
  EXPECT_THAT(ProblemsOfEdited("fashion_mnist_mlp.json", "\"epochs\": 12",
                               "\"epochs\": \"twelve\""),
              ElementsAre("$.training.epochs: is the string \"twelve\"; "
                          "expected number"));
  EXPECT_THAT(
      ProblemsOfEdited("fashion_mnist_convnet.json", "\"filters\": 12",
                       "\"filters\": 12.5"),
      ElementsAre("$.model.layers[1].Conv2D.filters: is the number 12.5; "
                  "expected integer or string"));
}

TEST(JobConfigsSchemaTest, AnUnknownEnumValueIsRefused) {
  EXPECT_THAT(
      ProblemsOfEdited("ctr_wide_deep.json", "\"ADAGRAD\"", "\"ADAGRA\""),
      ElementsAre("$.optimizer.kind: is the string \"ADAGRA\"; "
                  "expected one of \"KIND_UNSPECIFIED\", \"SGD\", "
                  "\"MOMENTUM\", \"ADAGRAD\", \"ADAM\", \"ADAMW\", "
                  "\"FTRL\""));
}

TEST(JobConfigsSchemaTest, BothFieldNamesAndTheSchemaKeyAreAccepted) {
  EXPECT_THAT(ProblemsOfEdited("fashion_mnist_mlp.json", "\"batch_size\"",
                               "\"batchSize\""),
              IsEmpty());
  EXPECT_THAT(ProblemsOfEdited("fashion_mnist_mlp.json", "{",
                               R"({"$schema": "job_config.schema.json", )"),
              IsEmpty());
}

}  // namespace
}  // namespace psflow
