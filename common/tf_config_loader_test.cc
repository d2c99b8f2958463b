#include "common/tf_config_loader.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kPsConfig[] =
    R"({"cluster": {"ps": ["p0:2222"], "worker": ["w0:2222"]},
        "task": {"type": "ps", "index": 0}})";
constexpr char kWorkerConfig[] =
    R"({"cluster": {"ps": ["p0:2222"], "worker": ["w0:2222"]},
        "task": {"type": "worker", "index": 0}})";

std::string WriteTempFile(const std::string& name,
                          const std::string& contents) {
  std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

TEST(TfConfigLoaderTest, ReadsTheEnvironmentVariableWhenNoFlagIsGiven) {
  ASSERT_OK_AND_ASSIGN(LoadedTfConfig loaded,
                       LoadTfConfig("", std::string(kPsConfig)));
  EXPECT_EQ(loaded.config.task.type, TaskType::kPs);
  EXPECT_EQ(loaded.source, "the TF_CONFIG environment variable");
}

TEST(TfConfigLoaderTest, InlineJsonFlagWinsOverTheEnvironment) {
  ASSERT_OK_AND_ASSIGN(LoadedTfConfig loaded,
                       LoadTfConfig(kWorkerConfig, std::string(kPsConfig)));
  EXPECT_EQ(loaded.config.task.type, TaskType::kWorker);
  EXPECT_EQ(loaded.source, "--tf_config (inline JSON)");
}

TEST(TfConfigLoaderTest, FlagNamingAFileReadsTheFile) {
  std::string path = WriteTempFile("worker.json", kWorkerConfig);
  ASSERT_OK_AND_ASSIGN(LoadedTfConfig loaded, LoadTfConfig(path, std::nullopt));
  EXPECT_EQ(loaded.config.task.type, TaskType::kWorker);
  EXPECT_EQ(loaded.source, "file " + path);
}

TEST(TfConfigLoaderTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadTfConfig("/nonexistent/tf_config.json", std::nullopt),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("/nonexistent/tf_config.json"),
                             HasSubstr("No such file"))));
}

TEST(TfConfigLoaderTest, AFifoOrAHugeFileIsRefused) {
  const std::string fifo =
      std::string(std::getenv("TEST_TMPDIR")) + "/tf_config.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(LoadTfConfig(fifo, std::nullopt),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(fifo), HasSubstr("a FIFO"))));
  const std::string huge =
      WriteTempFile("huge.json", std::string(2 << 20, ' '));
  EXPECT_THAT(LoadTfConfig(huge, std::nullopt),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("at most 1048576")));
}

TEST(TfConfigLoaderTest, ParseErrorsNameTheSource) {
  std::string path = WriteTempFile("bad.json", R"({"cluster": 3})");
  EXPECT_THAT(LoadTfConfig(path, std::nullopt),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("\"cluster\" is the number 3"),
                             HasSubstr("(read from file " + path + ")"))));
}

TEST(TfConfigLoaderTest, NothingSetIsAClearError) {
  EXPECT_THAT(LoadTfConfig("", std::nullopt),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("TF_CONFIG is not set"),
                             HasSubstr("--tf_config"))));
  EXPECT_THAT(LoadTfConfig("  ", std::string("")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("TF_CONFIG is not set")));
}

TEST(TfConfigLoaderTest, EnvironmentHoldingAPathSuggestsTheFlag) {
  EXPECT_THAT(LoadTfConfig("", std::string("/etc/tf_config.json")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("must hold JSON"),
                             HasSubstr("--tf_config=<path>"))));
}

TEST(TfConfigLoaderTest, ReadsTheProcessEnvironment) {
  ASSERT_EQ(setenv("TF_CONFIG", kPsConfig, 1), 0);
  ASSERT_OK_AND_ASSIGN(LoadedTfConfig loaded,
                       LoadTfConfigFromFlagOrEnvironment(""));
  EXPECT_EQ(loaded.config.task.type, TaskType::kPs);
  unsetenv("TF_CONFIG");
}

}  // namespace
}  // namespace psflow
