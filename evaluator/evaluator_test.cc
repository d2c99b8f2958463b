#include "evaluator/evaluator.h"

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "chief/job_coordinator.h"
#include "chief/local_coordinator_client.h"
#include "client/local_ps_shard.h"
#include "common/job/placement.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "model/initializer.h"
#include "model/registry.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

// A chief that never answers.
class SilentChief final : public CoordinatorClient {
 public:
  absl::StatusOr<JobSpec> Register(const TaskId&, uint64_t,
                                   absl::Time) override {
    return absl::UnavailableError("silent");
  }
  absl::StatusOr<StatusResponse> ReportProgress(const ProgressReport&,
                                                absl::Duration) override {
    return absl::UnavailableError("silent");
  }
  absl::StatusOr<StatusResponse> GetStatus(absl::Duration) override {
    return absl::UnavailableError("the chief at h:1 is gone");
  }
  absl::Status ReportEvaluation(const EvaluationReport&,
                                absl::Duration) override {
    return absl::UnavailableError("silent");
  }
  absl::StatusOr<int64_t> RestoreCheckpoint(const std::string&,
                                            absl::Duration) override {
    return absl::UnavailableError("silent");
  }
};

// Softmax regression over 4 features and 2 classes on one in-process
// parameter server, evaluated live (the job saves no checkpoints), with an
// in-process chief.
class EvaluatorTest : public ::testing::Test {
 protected:
  EvaluatorTest() {
    JobConfig& job = *spec_.mutable_config();
    job.mutable_model()->mutable_softmax_regression();
    job.mutable_evaluation()->set_batch_size(32);
    job.mutable_evaluation()->set_every_secs(0.1);
    spec_.set_total_steps(10);
    spec_.set_num_workers(1);
    spec_.add_example_shape(4);
    spec_.set_num_classes(2);
    ConfigureRequest& ps = *spec_.mutable_ps_config();
    ps.set_protocol_version(kProtocolVersion);
    ps.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    ps.mutable_learning_rate()->set_learning_rate(0.1);
    ps.set_mode(ASYNC);
    ps.set_num_workers(1);

    test_.num_examples = 100;
    test_.example_shape = {4};
    test_.num_features = 4;
    test_.num_classes = 2;
    for (int i = 0; i < 100; ++i) {
      test_.labels.push_back(i % 2);
      for (int f = 0; f < 4; ++f) test_.features.push_back((i * 13 + f) % 256);
    }
  }

  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(auto definition, DefineJobModel(spec_));
    const std::vector<LogicalVariable> variables =
        LogicalVariables(definition->variables());
    ASSERT_OK_AND_ASSIGN(Placement placement,
                         PlaceVariables(variables, 1, 1 << 20));
    core_ =
        std::make_unique<ParameterServerCore>(ParameterServerCore::Options{});
    std::vector<std::unique_ptr<PsShard>> shards;
    shards.push_back(std::make_unique<LocalPsShard>(core_.get(), "ps-0"));
    client_ = std::make_unique<ParameterClient>(std::move(shards), placement,
                                                ParameterClient::Options());
    ASSERT_OK(client_->Configure(spec_.ps_config()));
    ASSERT_OK(client_->CreateVariables());
    std::vector<std::vector<float>> initial =
        InitialValues(definition->variables(), 1);
    std::vector<ParameterClient::Const> values;
    for (size_t i = 0; i < variables.size(); ++i) {
      values.emplace_back(variables[i].name, initial[i]);
    }
    ASSERT_OK(client_->Assign(values)->Wait());
    JobCoordinator::Options options;
    options.num_workers = 1;
    coordinator_ = std::make_unique<JobCoordinator>(options);
    coordinator_->SetSpec(spec_);
    chief_ = std::make_unique<LocalCoordinatorClient>(
        coordinator_.get(), TaskId{TaskType::kEvaluator, 0});
    device_ = CreateCpuDevice(1);
    parts_.spec = &spec_;
    parts_.coordinator = chief_.get();
    parts_.client = client_.get();
    parts_.device = device_.get();
    parts_.test = &test_;
    policy_.poll_interval = absl::Milliseconds(1);
    policy_.retry_interval = absl::Milliseconds(1);
  }

  JobSpec spec_;
  Dataset test_;
  std::unique_ptr<ParameterServerCore> core_;
  std::unique_ptr<ParameterClient> client_;
  std::unique_ptr<JobCoordinator> coordinator_;
  std::unique_ptr<LocalCoordinatorClient> chief_;
  std::unique_ptr<Device> device_;
  Evaluator::Parts parts_;
  Evaluator::Policy policy_;
};

TEST_F(EvaluatorTest, EvaluatesTheLiveModelAndSendsTheFinalEvaluation) {
  absl::Status result;
  std::thread evaluator([&] { result = Evaluator(parts_, policy_).Run(); });
  // The chief's side: training ended, waiting for the final evaluation.
  std::optional<EvaluationReport> final_eval =
      coordinator_->RunFinalEvaluation(absl::InfiniteFuture());
  evaluator.join();
  EXPECT_OK(result);
  ASSERT_TRUE(final_eval.has_value());
  EXPECT_TRUE(final_eval->final());
  EXPECT_EQ(final_eval->per_class_accuracy_size(), 2);
  EXPECT_GE(final_eval->accuracy(), 0.0);
  EXPECT_LE(final_eval->accuracy(), 1.0);
  EXPECT_GT(final_eval->loss(), 0.0);
}

TEST_F(EvaluatorTest, AFailedJobEndsItWithTheJobsReason) {
  coordinator_->Fail("ps-0 was lost");
  EXPECT_THAT(Evaluator(parts_, policy_).Run(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("ps-0 was lost")));
}

TEST_F(EvaluatorTest, ASucceededJobEndsIt) {
  coordinator_->Succeed();
  EXPECT_OK(Evaluator(parts_, policy_).Run());
}

TEST_F(EvaluatorTest, AChiefSilentPastTheTimeoutIsGivenUp) {
  SilentChief silent;
  parts_.coordinator = &silent;
  policy_.chief_timeout = absl::Milliseconds(50);
  EXPECT_THAT(Evaluator(parts_, policy_).Run(),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("lost the chief: the chief at h:1 is gone")));
}

}  // namespace
}  // namespace psflow
