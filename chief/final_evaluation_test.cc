#include "chief/final_evaluation.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "tests/idx_files.h"
#include "tests/in_process_job.h"

namespace psflow {
namespace {

using ::psflow::testing::InProcessJob;
using ::psflow::testing::WriteIdxFile;
using ::testing::HasSubstr;

// The shared softmax-regression job (4 features, 2 classes) on one
// in-process server, with 100 held-out examples in IDX files.
class FinalEvaluationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<uint8_t> pixels, labels;
    for (int i = 0; i < 100; ++i) {
      labels.push_back(i % 2);
      for (int f = 0; f < 4; ++f) pixels.push_back((i * 13 + f) % 256);
    }
    ASSERT_OK_AND_ASSIGN(images_,
                         WriteIdxFile("final_eval_images", {100, 4}, pixels));
    ASSERT_OK_AND_ASSIGN(labels_,
                         WriteIdxFile("final_eval_labels", {100}, labels));
    spec_ = testing::SoftmaxRegressionSpec(ASYNC, 10, 0.1);
    DataConfig& data = *spec_.mutable_config()->mutable_data();
    data.set_test_images(images_);
    data.set_test_labels(labels_);
  }

  // Starts the job, then the chief's final evaluation.
  absl::Status Obtain(
      bool has_evaluator, bool evaluator_joined = false,
      std::function<absl::StatusOr<bool>(bool)> keep_model = nullptr,
      bool restart_server = false) {
    auto job = InProcessJob::Start(spec_, TaskId{TaskType::kChief, 0});
    if (!job.ok()) return job.status();
    job_ = *std::move(job);
    // Lost after training: unconfigured, its variables gone.
    if (restart_server) job_->RestartServer();
    if (evaluator_joined) {
      RegisterTaskRequest joined;
      joined.set_protocol_version(kProtocolVersion);
      joined.set_task_type("evaluator");
      if (absl::Status s = job_->coordinator->Register(joined).status();
          !s.ok()) {
        return s;
      }
    }
    FinalEvaluationOptions options;
    options.has_evaluator = has_evaluator;
    options.evaluator_timeout = absl::Milliseconds(50);
    options.keep_model = std::move(keep_model);
    options.check_interval = absl::Milliseconds(1);
    return ObtainFinalEvaluation(options, spec_, *job_->client,
                                 *job_->coordinator);
  }

  std::string images_, labels_;
  JobSpec spec_;
  std::unique_ptr<InProcessJob> job_;
};

TEST_F(FinalEvaluationTest, TheChiefEvaluatesWhenTheJobHasNoEvaluator) {
  ASSERT_OK(Obtain(/*has_evaluator=*/false));
  std::optional<EvaluationReport> report = job_->coordinator->last_evaluation();
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(report->final());
  EXPECT_EQ(report->evaluated_by(), "chief-0");
  EXPECT_EQ(report->per_class_accuracy_size(), 2);
  EXPECT_GT(report->loss(), 0.0);
  EXPECT_GE(report->accuracy(), 0.0);
  EXPECT_LE(report->accuracy(), 1.0);
}

TEST_F(FinalEvaluationTest, TheChiefEvaluatesWhenTheEvaluatorSendsNone) {
  // The evaluator joined and then went silent (killed for good).
  ASSERT_OK(Obtain(/*has_evaluator=*/true, /*evaluator_joined=*/true));
  std::optional<EvaluationReport> report = job_->coordinator->last_evaluation();
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(report->final());
  EXPECT_EQ(report->evaluated_by(), "chief-0");
  // A late report from the evaluator does not replace the final one.
  EvaluationReport late;
  late.set_global_step(3);
  EXPECT_OK(job_->coordinator->Evaluation(late));
  EXPECT_EQ(job_->coordinator->last_evaluation()->evaluated_by(), "chief-0");
}

// While it waits for the evaluator, the chief keeps the final model on
// the servers without waiting for one that does not answer; a model it
// cannot keep fails the job with that reason.
TEST_F(FinalEvaluationTest, TheModelIsKeptWhileTheEvaluatorIsAwaited) {
  std::vector<bool> calls;
  absl::Status result = Obtain(
      /*has_evaluator=*/true, /*evaluator_joined=*/true,
      [&calls](bool wait_for_servers) -> absl::StatusOr<bool> {
        calls.push_back(wait_for_servers);
        if (calls.size() < 3) return false;
        return absl::FailedPreconditionError("ps-0 lost; no checkpoints");
      });
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr("ps-0 lost; no checkpoints")));
  EXPECT_THAT(calls, ::testing::ElementsAre(false, false, false));
  EXPECT_EQ(job_->coordinator->state(), FINAL_EVALUATION);
}

// A restore gives the evaluator its full time again: the wait outlasts
// the first deadline.
TEST_F(FinalEvaluationTest, ARestoreGivesTheEvaluatorItsTimeAgain) {
  int restores = 0;
  const absl::Time start = absl::Now();
  ASSERT_OK(Obtain(/*has_evaluator=*/true, /*evaluator_joined=*/true,
                   [&](bool) -> absl::StatusOr<bool> {
                     // Restores until well past the first 50 ms.
                     if (absl::Now() - start > absl::Milliseconds(120)) {
                       return false;
                     }
                     ++restores;
                     return true;
                   }));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(120));
  EXPECT_GT(restores, 0);
  // Given up on in the end: the chief evaluated.
  EXPECT_EQ(job_->coordinator->last_evaluation()->evaluated_by(), "chief-0");
}

// The chief's own evaluation of the live model fails on a restarted
// server; once the model is restored there (keep_model, waiting for the
// servers), it is evaluated again.
TEST_F(FinalEvaluationTest, TheChiefEvaluatesAgainAfterARestore) {
  std::vector<bool> calls;
  ASSERT_OK(Obtain(
      /*has_evaluator=*/false, /*evaluator_joined=*/false,
      [&](bool wait_for_servers) -> absl::StatusOr<bool> {
        calls.push_back(wait_for_servers);
        RETURN_IF_ERROR(job_->ConfigureServers(spec_));
        return true;
      },
      /*restart_server=*/true));
  EXPECT_THAT(calls, ::testing::ElementsAre(true));
  std::optional<EvaluationReport> report = job_->coordinator->last_evaluation();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->evaluated_by(), "chief-0");
}

TEST_F(FinalEvaluationTest, AJobWithoutTestDataHasNoFinalEvaluation) {
  spec_.mutable_config()->mutable_data()->clear_test_images();
  spec_.mutable_config()->mutable_data()->clear_test_labels();
  ASSERT_OK(Obtain(/*has_evaluator=*/false));
  EXPECT_FALSE(job_->coordinator->last_evaluation().has_value());
}

TEST_F(FinalEvaluationTest, UnreadableTestDataFailsTheJobNamingTheFix) {
  spec_.mutable_config()->mutable_data()->set_test_images(images_ + ".gone");
  absl::Status result = Obtain(/*has_evaluator=*/true);
  EXPECT_FALSE(result.ok());
  EXPECT_THAT(result.message(), HasSubstr(".gone"));
  EXPECT_THAT(result.message(),
              HasSubstr("the evaluator sent no final evaluation"));
  EXPECT_THAT(result.message(),
              HasSubstr("make the test data readable by the chief"));
  EXPECT_FALSE(job_->coordinator->last_evaluation().has_value());
}

}  // namespace
}  // namespace psflow
