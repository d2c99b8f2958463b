#include "client/psctl/tfconfig_gen.h"

#include "common/status_matchers.h"
#include "common/tf_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

TEST(TfConfigGenTest, EveryTaskGetsTheWholeClusterAndItsOwnEntry) {
  TfConfigGenOptions options;
  options.chief = "chief.example";
  options.ps = {"ps0.example:2300", "ps1.example"};
  options.workers = {"w0.example", "w1.example", "10.0.0.7:2400"};
  options.evaluator = "eval.example";
  ASSERT_OK_AND_ASSIGN(auto configs, GenerateTfConfigs(options));
  ASSERT_THAT(configs, SizeIs(7));
  for (const auto& [task, json] : configs) {
    ASSERT_OK_AND_ASSIGN(TfConfig parsed, ParseTfConfig(json));
    EXPECT_EQ(parsed.task, task);
    EXPECT_EQ(parsed.cluster.NumTasks(TaskType::kPs), 2);
    EXPECT_EQ(parsed.cluster.NumTasks(TaskType::kWorker), 3);
    EXPECT_EQ(*parsed.cluster.Address(TaskId{TaskType::kPs, 0}),
              "ps0.example:2300");
    EXPECT_EQ(*parsed.cluster.Address(TaskId{TaskType::kPs, 1}),
              "ps1.example:2222");
    EXPECT_EQ(*parsed.cluster.Address(TaskId{TaskType::kChief, 0}),
              "chief.example:2222");
  }
  EXPECT_EQ(configs.front().first, (TaskId{TaskType::kChief, 0}));
  EXPECT_EQ(configs.back().first, (TaskId{TaskType::kEvaluator, 0}));
}

TEST(TfConfigGenTest, BadClustersAreRefusedWithTheReason) {
  TfConfigGenOptions options;
  options.ps = {"a"};
  EXPECT_THAT(GenerateTfConfigs(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--ps and --workers")));
  options.workers = {"a"};  // the same address as the ps
  EXPECT_THAT(GenerateTfConfigs(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the cluster is not valid")));
  options.workers = {"b:99999"};
  EXPECT_THAT(GenerateTfConfigs(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--workers entry 1")));
}

}  // namespace
}  // namespace psflow
