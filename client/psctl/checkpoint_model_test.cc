#include "client/psctl/checkpoint_model.h"

#include <fstream>
#include <map>
#include <string>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

CheckpointIndex RecordedMlp() {
  CheckpointIndex index;
  index.set_job_name("mnist");
  CheckpointModel& model = *index.mutable_model();
  model.mutable_config()->mutable_mlp()->add_hidden_sizes(8);
  model.set_data_format(DataConfig::IDX);
  model.add_example_shape(28);
  model.add_example_shape(28);
  model.set_num_classes(10);
  return index;
}

TEST(CheckpointModelTest, TheRecordedModelIsUsed) {
  ASSERT_OK_AND_ASSIGN(CheckpointModelInfo model,
                       ResolveCheckpointModel(RecordedMlp(), ""));
  EXPECT_EQ(model.config.mlp().hidden_sizes(0), 8);
  EXPECT_THAT(model.input.example_shape, ElementsAre(28, 28));
  EXPECT_EQ(model.input.num_classes, 10);
  EXPECT_EQ(model.data_format, DataConfig::IDX);
  EXPECT_EQ(model.source, "the checkpoint");
}

TEST(CheckpointModelTest, ACheckpointWithoutARecordAsksForTheJobsConfig) {
  CheckpointIndex old;
  old.set_job_name("mnist");
  EXPECT_THAT(ResolveCheckpointModel(old, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("does not record its model"),
                             HasSubstr("--job=<config.json>"))));
}

TEST(CheckpointModelTest, AJobConfigGivesTheModelAndTheCriteoInputShape) {
  const std::string path = ::testing::TempDir() + "/ctr_job.json";
  std::ofstream(path) << R"({"name": "ctr",
    "model": {"graph": {
      "inputs": [{"name": "dense", "features": {}},
                 {"name": "c", "categorical": {"field": 0, "dim": 2}}],
      "nodes": [{"name": "joined", "inputs": ["dense", "c"],
                 "layer": {"Concatenate": {}}},
                {"name": "logit", "inputs": ["joined"],
                 "layer": {"Dense": {"units": 1}}}],
      "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}}},
    "optimizer": {"kind": "ADAGRAD"},
    "learning_rate": {"learning_rate": 0.05},
    "data": {"format": "CRITEO", "train_path": "/nonexistent/train.txt",
             "num_dense": 3, "num_fields": 5},
    "training": {"batch_size": 8, "steps": 1, "mode": "ASYNC"}})";
  // --job wins over the record.
  ASSERT_OK_AND_ASSIGN(CheckpointModelInfo model,
                       ResolveCheckpointModel(RecordedMlp(), path));
  EXPECT_TRUE(model.config.has_graph());
  EXPECT_EQ(model.data_format, DataConfig::CRITEO);
  EXPECT_THAT(model.input.example_shape, ElementsAre(3));
  EXPECT_EQ(model.input.num_fields, 5);
  EXPECT_EQ(model.input.num_classes, 2);
  EXPECT_EQ(model.source, "--job=" + path);
}

TEST(CheckpointModelTest, TheMetadataNameTheModelInputAndLayouts) {
  ASSERT_OK_AND_ASSIGN(CheckpointModelInfo model,
                       ResolveCheckpointModel(RecordedMlp(), ""));
  std::map<std::string, std::string> metadata = ExportMetadata(model);
  EXPECT_EQ(metadata["model"], R"({"mlp":{"hidden_sizes":["8"]}})");
  EXPECT_THAT(metadata["input"],
              AllOf(HasSubstr(R"("example_shape":[28,28])"),
                    HasSubstr(R"("num_classes":10)"),
                    HasSubstr("raw pixel bytes times 0.00392156886 (1/255)")));
  EXPECT_THAT(metadata["layout"],
              HasSubstr("Dense kernels are [in, out]: y = x @ kernel + bias"));
  EXPECT_EQ(metadata["model_source"], "the checkpoint");
}

}  // namespace
}  // namespace psflow
