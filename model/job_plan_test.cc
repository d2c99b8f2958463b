#include "model/job_plan.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/job/job_config.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/idx_files.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/job_plan_test_", name);
}

// An uncompressed IDX file of unsigned bytes holding `data` (which may be
// shorter than the dimensions promise), at a fresh path.
std::string WriteIdx(const std::string& name, const std::vector<int>& dims,
                     const std::vector<uint8_t>& data) {
  absl::StatusOr<std::string> path =
      ::psflow::testing::WriteIdxFile(name, dims, data);
  EXPECT_TRUE(path.ok()) << path.status();
  return path.value_or("");
}

// Six 4x4 images labelled 0, 1, 2, 0, 1, 2.
struct ImageFiles {
  std::string images =
      WriteIdx("images", {6, 4, 4}, std::vector<uint8_t>(6 * 16, 7));
  std::string labels = WriteIdx("labels", {6}, {0, 1, 2, 0, 1, 2});
};

// `training` holds the training settings beyond batch_size and steps.
JobConfig ImageJob(const ImageFiles& files,
                   const std::string& training = R"("mode": "ASYNC")") {
  absl::StatusOr<JobConfig> job = ParseJobConfig(
      absl::StrCat(R"({"model": {"mlp": {"hidden_sizes": [8]}},
          "optimizer": {"kind": "SGD"},
          "learning_rate": {"learning_rate": 0.1},
          "data": {"train_images": ")",
                   files.images, R"(", "train_labels": ")", files.labels,
                   R"("},
          "training": {"batch_size": 2, "steps": 10, )",
                   training, "}}"),
      "test.json");
  EXPECT_OK(job.status());
  return *job;
}

JobPlanOptions Options(int num_ps, int num_workers) {
  JobPlanOptions options;
  options.num_ps = num_ps;
  options.num_workers = num_workers;
  options.host = {int64_t{64} << 30, "the test's 64 GiB"};
  return options;
}

TEST(DescribeTrainingDataTest, ReadsTheImagesHeaderAndTheLabels) {
  const ImageFiles files;
  ASSERT_OK_AND_ASSIGN(TrainingData data,
                       DescribeTrainingData(ImageJob(files)));
  EXPECT_EQ(data.num_examples, 6);
  EXPECT_THAT(data.example_shape, ElementsAre(4, 4));
  EXPECT_EQ(data.num_classes, 3);
  EXPECT_EQ(data.num_fields, 0);
}

TEST(DescribeTrainingDataTest, DeclaredClassesMustHoldEveryLabel) {
  const ImageFiles files;
  JobConfig job = ImageJob(files);
  job.mutable_data()->set_num_classes(2);
  EXPECT_THAT(DescribeTrainingData(job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(files.labels + " record 2 has label 2"),
                             HasSubstr("data.num_classes"))));
  job.mutable_data()->set_num_classes(10);
  ASSERT_OK_AND_ASSIGN(TrainingData data, DescribeTrainingData(job));
  EXPECT_EQ(data.num_classes, 10);
}

TEST(DescribeTrainingDataTest, LabelsOfAnotherSplitAreRefused) {
  const ImageFiles files;
  JobConfig job = ImageJob(files);
  job.mutable_data()->set_train_labels(
      WriteIdx("other_labels", {4}, {0, 1, 0, 1}));
  EXPECT_THAT(DescribeTrainingData(job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("they must come from the same split")));
}

TEST(DescribeTrainingDataTest, AMissingFileIsNotFound) {
  const ImageFiles files;
  JobConfig job = ImageJob(files);
  job.mutable_data()->set_train_images(TempPath("missing"));
  EXPECT_THAT(
      DescribeTrainingData(job),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr(TempPath("missing"))));
}

TEST(DescribeTrainingDataTest, ACriteoFileIsCountedLineByLine) {
  const std::string path = TempPath("ctr.txt");
  ASSERT_OK(WriteFileAtomically(path, "1\t5\ta1\n0\t\tb2\n0\t3\t\n"));
  JobConfig job;
  job.mutable_data()->set_format(DataConfig::CRITEO);
  job.mutable_data()->set_train_path(path);
  job.mutable_data()->set_num_dense(1);
  job.mutable_data()->set_num_fields(1);
  ASSERT_OK_AND_ASSIGN(TrainingData data, DescribeTrainingData(job));
  EXPECT_EQ(data.num_examples, 3);
  EXPECT_THAT(data.example_shape, ElementsAre(1));
  EXPECT_EQ(data.num_classes, 2);
  EXPECT_EQ(data.num_fields, 1);

  job.mutable_data()->set_num_fields(2);
  EXPECT_THAT(
      DescribeTrainingData(job),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(path + ":1:")));
}

TEST(CtrTrainingDataTest, DefaultsToCriteosColumns) {
  JobConfig job;
  job.mutable_data()->set_format(DataConfig::CRITEO);
  const TrainingData data = CtrTrainingData(job, 1000);
  EXPECT_EQ(data.num_examples, 1000);
  EXPECT_THAT(data.example_shape, ElementsAre(13));
  EXPECT_EQ(data.num_fields, 26);
  EXPECT_EQ(data.num_classes, 2);
}

TEST(PlanJobTest, DefinesTheModelAndPlacesItsVariables) {
  const ImageFiles files;
  const JobConfig job = ImageJob(files);
  ASSERT_OK_AND_ASSIGN(TrainingData data, DescribeTrainingData(job));
  ASSERT_OK_AND_ASSIGN(JobPlan plan, PlanJob(job, data, Options(2, 3)));
  ASSERT_NE(plan.model, nullptr);
  // 16 inputs -> 8 hidden -> 3 classes.
  EXPECT_EQ(plan.model->input().num_features(), 16);
  EXPECT_EQ(plan.model->input().num_classes, 3);
  EXPECT_EQ(plan.placement.bytes_per_ps.size(), 2u);
  EXPECT_EQ(plan.placement.variables.size(), plan.model->variables().size());
  EXPECT_GT(plan.memory.worker_bytes(), kWorkerRuntimeBytes);
  EXPECT_TRUE(plan.tables.empty());
}

TEST(PlanJobTest, ABatchNoShardCanFillIsRefused) {
  const ImageFiles files;
  const JobConfig job = ImageJob(files);
  // Six examples over four workers: shards of one.
  EXPECT_THAT(PlanJob(job, *DescribeTrainingData(job), Options(1, 4)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("training.batch_size is 2")));
}

TEST(PlanJobTest, SyncCannotAggregateMoreReplicasThanWorkers) {
  const ImageFiles files;
  const JobConfig job =
      ImageJob(files, R"("mode": "SYNC", "replicas_to_aggregate": 3)");
  EXPECT_THAT(PlanJob(job, *DescribeTrainingData(job), Options(1, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("training.replicas_to_aggregate is 3 but "
                                 "the job has 2 workers; use 1..2")));
  EXPECT_OK(PlanJob(job, *DescribeTrainingData(job), Options(1, 3)).status());
}

TEST(PlanJobTest, AModelLargerThanTheWorkersMemoryIsRefused) {
  const ImageFiles files;
  // Less than the process itself needs.
  const JobConfig job =
      ImageJob(files, R"("mode": "ASYNC", "worker_memory_mib": 100)");
  EXPECT_THAT(PlanJob(job, *DescribeTrainingData(job), Options(1, 1)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("the job does not fit in memory"),
                             HasSubstr("training.worker_memory_mib"))));
}

TEST(PlanJobTest, AWorkerIsCheckedAgainstTheHostsMemory) {
  const ImageFiles files;
  const JobConfig job = ImageJob(files);
  JobPlanOptions options = Options(1, 1);
  options.host = {int64_t{64} << 20, "a 64 MiB host"};
  EXPECT_THAT(PlanJob(job, *DescribeTrainingData(job), options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("more than the 64 MiB of a 64 MiB host")));
}

// The evaluation scores the test set a batch of evaluation.batch_size at
// a time, never more than the test set: a batch the host cannot hold is
// refused before training, naming the setting (it used to fail the job
// only after training, with a message about the test data).
TEST(PlanJobTest, TheEvaluationsBatchIsCheckedAgainstTheHostsMemory) {
  const ImageFiles files;
  JobConfig job = ImageJob(files);
  job.mutable_evaluation()->set_batch_size(2000000000);
  JobPlanOptions options = Options(1, 1);
  options.has_test_data = true;
  EXPECT_THAT(PlanJob(job, *DescribeTrainingData(job), options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("the evaluation does not fit in memory"),
                             HasSubstr("a batch of 2000000000 test examples"),
                             HasSubstr("Lower evaluation.batch_size"))));
  // Capped at the test set's size, the same setting fits.
  options.test_examples = 10000;
  ASSERT_OK_AND_ASSIGN(JobPlan plan,
                       PlanJob(job, *DescribeTrainingData(job), options));
  ASSERT_TRUE(plan.evaluation_memory.has_value());
  EXPECT_EQ(plan.evaluation_memory->batch_size, 10000);
  // Without test data there is nothing to check.
  options.has_test_data = false;
  options.test_examples = 0;
  ASSERT_OK_AND_ASSIGN(plan, PlanJob(job, *DescribeTrainingData(job), options));
  EXPECT_FALSE(plan.evaluation_memory.has_value());
}

// The evaluator and the chief's final evaluation read the test set whole:
// a small compressed test file that claims gigabytes was checked only for
// its batch, and the evaluation ran out of memory after the check said it
// fit.
TEST(PlanJobTest, TheTestSetCountsInTheEvaluationsMemory) {
  const ImageFiles files;
  const JobConfig job = ImageJob(files);
  JobPlanOptions options = Options(1, 1);
  options.has_test_data = true;
  options.test_examples = 1000;
  ASSERT_OK_AND_ASSIGN(JobPlan plan,
                       PlanJob(job, *DescribeTrainingData(job), options));
  ASSERT_TRUE(plan.evaluation_memory.has_value());
  // 1000 examples of 16 pixels and a label.
  EXPECT_EQ(plan.evaluation_memory->data_bytes, 1000 * 17);
  // As many examples as 64 GiB of pixels, more than any test host here.
  options.test_examples = int64_t{64} << 30 >> 4;
  EXPECT_THAT(PlanJob(job, *DescribeTrainingData(job), options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("the evaluation does not fit"),
                             HasSubstr("the test set, read whole: 68.0 GiB"),
                             HasSubstr("smaller test set"))));
}

// A worker's own read of the training files must find the examples the
// chief counted: otherwise the shards overlap or leave examples out.
TEST(DescribeTrainingDataTest, ATasksCountMustBeTheChiefs) {
  EXPECT_OK(CheckSameExamplesAsTheChief(0, 60000, "the training data x"));
  EXPECT_OK(CheckSameExamplesAsTheChief(60000, 60000, "the training data x"));
  EXPECT_THAT(CheckSameExamplesAsTheChief(60000, 59000, "the training data x"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("the training data x hold 59000 "
                                       "examples here, but 60000 where the "
                                       "chief read them"),
                             HasSubstr("the same data files"))));
}

// A worker reads the whole training file, then copies its shard out: a
// small compressed file that claims gigabytes must be counted from its
// header before any worker tries to hold them.
TEST(PlanJobTest, TheTrainingDataCountsInAWorkersMemory) {
  const ImageFiles files;
  const JobConfig job =
      ImageJob(files, R"("mode": "ASYNC", "worker_memory_mib": 1024)");
  ASSERT_OK_AND_ASSIGN(TrainingData data, DescribeTrainingData(job));
  ASSERT_OK_AND_ASSIGN(JobPlan small, PlanJob(job, data, Options(1, 2)));
  // 6 examples of 16 pixels and a label, plus a shard of at most 4.
  EXPECT_EQ(small.memory.data_bytes, (6 + 3 + 1) * 17);
  EXPECT_EQ(WorkerDataBytes(data, 2), (6 + 3 + 1) * 17);

  // The same shape, as many examples as 4 GiB of pixels.
  data.num_examples = int64_t{4} << 30 >> 4;
  EXPECT_THAT(PlanJob(job, data, Options(1, 2)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("the training data 6.4 GiB"),
                             HasSubstr("training.worker_memory_mib"),
                             HasSubstr("train on less data"))));
  // Hostile sizes saturate instead of overflowing.
  data.num_examples = int64_t{1} << 62;
  EXPECT_EQ(WorkerDataBytes(data, 1), int64_t{1} << 62);
}

TEST(PlanJobTest, AModelThatCannotTakeTheDataIsRefused) {
  const ImageFiles files;
  JobConfig job = ImageJob(files);
  // A 5x5 window on 4x4 images.
  job.mutable_model()->Clear();
  LayerConfig::Conv2D* conv =
      job.mutable_model()->add_layers()->mutable_conv2d();
  conv->set_filters(2);
  conv->add_kernel_size(5);
  job.mutable_model()->add_layers()->mutable_flatten();
  job.mutable_model()->add_layers()->mutable_dense()->set_units(3);
  EXPECT_THAT(PlanJob(job, *DescribeTrainingData(job), Options(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PlanJobTest, AWideAndDeepModelCreatesItsTables) {
  absl::StatusOr<JobConfig> job = ParseJobConfig(
      R"({"model": {"wide_deep": {"embedding_dim": 4, "hidden_sizes": [8]}},
          "optimizer": {"kind": "ADAGRAD"},
          "learning_rate": {"learning_rate": 0.1},
          "data": {"format": "CRITEO", "train_path": "unused.txt",
                   "num_dense": 2, "num_fields": 3},
          "training": {"batch_size": 4, "steps": 10, "mode": "ASYNC"}})",
      "test.json");
  ASSERT_OK(job.status());
  ASSERT_OK_AND_ASSIGN(
      JobPlan plan, PlanJob(*job, CtrTrainingData(*job, 100), Options(2, 2)));
  ASSERT_EQ(plan.tables.size(), 2u);
  EXPECT_EQ(plan.placement.tables.size(), 2u);
  EXPECT_EQ(plan.tables[0].name(), "embedding");
  EXPECT_EQ(plan.tables[0].dim(), 4);
  EXPECT_EQ(plan.placement.tables[0].name, "embedding");
}

}  // namespace
}  // namespace psflow
