#include "client/ps_client.h"

#include <numeric>
#include <thread>

#include "client/local_ps_shard.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kNumPs = 3;

ConfigureRequest SgdConfig(UpdateMode mode, int workers = 1, int replicas = 1) {
  ConfigureRequest config;
  config.set_protocol_version(kProtocolVersion);
  config.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  config.mutable_learning_rate()->set_learning_rate(1.0);
  config.set_mode(mode);
  config.set_num_workers(workers);
  config.set_replicas_to_aggregate(replicas);
  return config;
}

// Three in-process servers with 4-element chunks; "emb" (10 x 3) is split
// over all three, "bias" and "scale" are whole.
class ParameterClientTest : public ::testing::Test {
 protected:
  void Start(const ConfigureRequest& config) {
    std::vector<std::unique_ptr<PsShard>> shards;
    for (int i = 0; i < kNumPs; ++i) {
      cores_.push_back(std::make_unique<ParameterServerCore>(
          ParameterServerCore::Options{4 * sizeof(float)}));
      shards.push_back(std::make_unique<LocalPsShard>(cores_.back().get(),
                                                      absl::StrCat("ps-", i)));
    }
    absl::StatusOr<Placement> placement =
        PlaceVariables({{"emb", {10, 3}}, {"bias", {5}}, {"scale", {}}}, kNumPs,
                       /*split_threshold_bytes=*/64);
    ASSERT_OK(placement);
    client_ = std::make_unique<ParameterClient>(std::move(shards), *placement,
                                                ParameterClient::Options());
    ASSERT_OK(client_->Configure(config));
    ASSERT_OK(client_->CreateVariables());
  }

  std::vector<std::unique_ptr<ParameterServerCore>> cores_;
  std::unique_ptr<ParameterClient> client_;
  std::vector<float> emb_ = std::vector<float>(30);
  std::vector<float> bias_ = std::vector<float>(5);
  std::vector<float> scale_ = std::vector<float>(1);
};

TEST_F(ParameterClientTest, SplitVariablesLandOnEveryServer) {
  Start(SgdConfig(ASYNC));
  for (const auto& core : cores_) {
    EXPECT_GE(core->Stats().num_variables(), 1);
  }
  EXPECT_EQ(client_->placement().Find("emb")->parts.size(), 3u);
}

TEST_F(ParameterClientTest, AssignedValuesGatherBackInPlace) {
  Start(SgdConfig(ASYNC));
  std::iota(emb_.begin(), emb_.end(), 0.0f);
  bias_ = {100, 101, 102, 103, 104};
  scale_ = {7};
  ASSERT_OK(client_->Assign({{"emb", emb_}, {"bias", bias_}, {"scale", scale_}})
                ->Wait());
  std::vector<float> emb(30), bias(5), scale(1);
  auto pull = client_->Pull({{"emb", absl::MakeSpan(emb)},
                             {"bias", absl::MakeSpan(bias)},
                             {"scale", absl::MakeSpan(scale)}});
  ASSERT_OK(pull->Wait());
  EXPECT_EQ(emb, emb_);
  EXPECT_EQ(bias, bias_);
  EXPECT_EQ(scale, scale_);
  EXPECT_EQ(pull->min_version(), 0);
}

TEST_F(ParameterClientTest, PushScattersGradientsToTheirParts) {
  Start(SgdConfig(ASYNC));
  std::vector<float> grad(30);
  std::iota(grad.begin(), grad.end(), 1.0f);
  ASSERT_OK(client_->Push({{"emb", grad}})->Wait());
  std::vector<float> emb(30);
  ASSERT_OK(client_->Pull({{"emb", absl::MakeSpan(emb)}})->Wait());
  for (int i = 0; i < 30; ++i) EXPECT_EQ(emb[i], -(i + 1.0f)) << i;
  int64_t updates = 0;
  for (const auto& core : cores_) updates += core->Stats().updates_applied();
  // 10 rows split 4/3/3 -> parts of 12, 9, 9 elements -> 3 + 3 + 3 chunks.
  EXPECT_EQ(updates, 9);
}

TEST_F(ParameterClientTest, UnknownVariableIsNotFound) {
  Start(SgdConfig(ASYNC));
  std::vector<float> x(3);
  EXPECT_THAT(client_->Pull({{"nope", absl::MakeSpan(x)}})->Wait(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("\"nope\" is not in the placement")));
}

TEST_F(ParameterClientTest, WrongBufferSizeIsInvalidArgument) {
  Start(SgdConfig(ASYNC));
  std::vector<float> x(4);
  EXPECT_THAT(client_->Push({{"bias", x}})->Wait(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"bias\" has 5 elements but the buffer "
                                 "holds 4")));
}

TEST_F(ParameterClientTest, ServerErrorsNameTheVariablePart) {
  Start(SgdConfig(ASYNC));
  std::vector<float> grad(30, 1.0f);
  grad[20] = std::numeric_limits<float>::infinity();
  EXPECT_THAT(client_->Push({{"emb", grad}})->Wait(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("push to \"emb/part_1\"")));
}

TEST_F(ParameterClientTest, UseBeforeConfigureIsRefused) {
  ParameterClient client({}, Placement(), ParameterClient::Options());
  std::vector<float> x(1);
  EXPECT_THAT(client.Pull({{"x", absl::MakeSpan(x)}})->Wait(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("before Configure()")));
}

TEST_F(ParameterClientTest, SyncWorkersAdvanceTogetherStepByStep) {
  constexpr int kWorkers = 2;
  constexpr int kSteps = 5;
  Start(SgdConfig(SYNC, kWorkers, kWorkers));
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      std::vector<float> bias(5), grad(5);
      for (int step = 0; step < kSteps; ++step) {
        auto pull = client_->Pull({{"bias", absl::MakeSpan(bias)}}, step);
        ASSERT_OK(pull->Wait());
        ASSERT_EQ(pull->min_version(), step);
        // Worker w's gradient is (w + 1): the average is 1.5 per step.
        std::fill(grad.begin(), grad.end(), w + 1.0f);
        ASSERT_OK(client_->Push({{"bias", grad}}, step, w)->Wait());
      }
    });
  }
  for (auto& worker : workers) worker.join();
  std::vector<float> bias(5);
  auto pull = client_->Pull({{"bias", absl::MakeSpan(bias)}}, kSteps);
  ASSERT_OK(pull->Wait());
  EXPECT_THAT(bias, Each(-1.5f * kSteps));
}

}  // namespace
}  // namespace psflow
