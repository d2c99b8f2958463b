#include "evaluation/ctr_evaluation.h"

#include <cmath>
#include <memory>
#include <vector>

#include "common/binary_metrics.h"
#include "common/status_matchers.h"
#include "data/ctr_examples.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "proto/protocol.h"
#include "tests/in_process_job.h"

namespace psflow {
namespace {

using ::psflow::testing::InProcessJob;
using ::testing::FloatNear;
using ::testing::Pointwise;

// A small wide-and-deep model on 2 dense columns and 3 fields, its tables'
// rows drawn from `row_initializer`, on one in-process server holding its
// initial values; nothing trained, so every id is one the servers never
// saw.
JobSpec WideDeepSpec(RowInitializerConfig::Kind row_initializer) {
  JobSpec spec;
  JobConfig& job = *spec.mutable_config();
  ModelConfig::WideDeep& model = *job.mutable_model()->mutable_wide_deep();
  model.set_embedding_dim(4);
  model.add_hidden_sizes(4);
  for (EmbeddingTableSpec* table :
       {model.mutable_embedding(), model.mutable_linear()}) {
    table->mutable_initializer()->set_kind(row_initializer);
    table->mutable_initializer()->set_scale(0.5);
    table->mutable_initializer()->set_seed(3);
  }
  job.mutable_evaluation()->set_batch_size(3);
  spec.add_example_shape(2);
  spec.set_num_classes(2);
  spec.set_num_fields(3);
  spec.set_num_workers(1);
  ConfigureRequest& ps = *spec.mutable_ps_config();
  ps.set_protocol_version(kProtocolVersion);
  ps.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  ps.mutable_learning_rate()->set_learning_rate(0.1);
  ps.set_mode(ASYNC);
  ps.set_num_workers(1);
  ps.set_replicas_to_aggregate(1);
  return spec;
}

// Ten examples; example 4 has no ids at all (every bag empty).
CtrExamples TestExamples() {
  CtrExamples test;
  test.num_dense = 2;
  test.num_fields = 3;
  test.num_examples = 10;
  test.offsets = {0};
  for (int i = 0; i < 10; ++i) {
    test.labels.push_back(i % 3 == 0 ? 1 : 0);
    test.dense.push_back(CtrDenseFeature(i));
    test.dense.push_back(CtrDenseFeature(100 - 7 * i));
    for (int f = 0; f < 3; ++f) {
      for (int k = 0; i != 4 && k < (i + f) % 3; ++k) {
        test.ids.push_back(CtrFeatureId(f, i * 10 + k));
      }
      test.offsets.push_back(static_cast<int64_t>(test.ids.size()));
    }
  }
  return test;
}

class CtrEvaluationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = WideDeepSpec(RowInitializerConfig::UNIFORM);
    ASSERT_OK_AND_ASSIGN(
        job_, InProcessJob::Start(spec_, TaskId{TaskType::kEvaluator, 0}));
  }

  JobSpec spec_;
  std::unique_ptr<InProcessJob> job_;
  std::unique_ptr<Device> device_ = CreateCpuDevice(1);
  const CtrExamples test_ = TestExamples();
};

TEST_F(CtrEvaluationTest, ScoresEveryExampleInOrderWhateverTheBatchSize) {
  ASSERT_OK_AND_ASSIGN(CtrScores in_threes,
                       ScoreCtrOnce(spec_, *job_->client, *device_, test_));
  JobSpec one_batch = spec_;
  one_batch.mutable_config()->mutable_evaluation()->set_batch_size(1000);
  ASSERT_OK_AND_ASSIGN(CtrScores whole,
                       ScoreCtrOnce(one_batch, *job_->client, *device_, test_));
  ASSERT_EQ(in_threes.probabilities.size(), 10u);
  EXPECT_THAT(in_threes.probabilities,
              Pointwise(FloatNear(1e-6), whole.probabilities));
  EXPECT_EQ(in_threes.correct, whole.correct);
  EXPECT_EQ(in_threes.global_step, 0);
}

TEST_F(CtrEvaluationTest, TheReportScoresTheProbabilitiesAgainstTheLabels) {
  ASSERT_OK_AND_ASSIGN(CtrScores scores,
                       ScoreCtrOnce(spec_, *job_->client, *device_, test_));
  ASSERT_OK_AND_ASSIGN(EvaluationReport report,
                       EvaluateCtrOnce(spec_, *job_->client, *device_, test_));
  ASSERT_OK_AND_ASSIGN(double auc,
                       AreaUnderRoc(scores.probabilities, test_.labels));
  EXPECT_DOUBLE_EQ(report.auc(), auc);
  EXPECT_DOUBLE_EQ(report.loss(), LogLoss(scores.probabilities, test_.labels));
  EXPECT_DOUBLE_EQ(report.accuracy(), scores.correct / 10.0);
}

// An id no table row holds reads zeros, the table's default row, as an
// exported ONNX model reads it (docs/models.md), whatever the table's
// initializer: nothing here was trained, so the scores are those of a
// model whose tables start at zeros.
TEST_F(CtrEvaluationTest, AnIdTheServersNeverSawReadsZeros) {
  ASSERT_OK_AND_ASSIGN(CtrScores uniform_tables,
                       ScoreCtrOnce(spec_, *job_->client, *device_, test_));
  const JobSpec zeros_spec = WideDeepSpec(RowInitializerConfig::ZEROS);
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<InProcessJob> zeros,
      InProcessJob::Start(zeros_spec, TaskId{TaskType::kEvaluator, 0}));
  ASSERT_OK_AND_ASSIGN(
      CtrScores zero_tables,
      ScoreCtrOnce(zeros_spec, *zeros->client, *device_, test_));
  EXPECT_THAT(uniform_tables.probabilities,
              Pointwise(FloatNear(1e-7), zero_tables.probabilities));
}

TEST(CtrReportTest, ScoresOfAnotherLengthAreInvalid) {
  CtrScores scores;
  scores.probabilities = {0.5f, 0.25f};
  EXPECT_THAT(CtrReport(scores, TestExamples()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psflow
