// Moving-average (non-trainable) variables on a ParameterServerCore: a push
// x sets v = momentum * v + (1 - momentum) * x, with no learning rate, no
// slots, and the same sync aggregation as gradients. (Apart from
// ps_core_test.cc only to keep each file small.)
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/ps_core.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Tiny chunks (4 elements): "mean" (6 elements) spans two.
constexpr int64_t kChunkBytes = 4 * sizeof(float);

ConfigureRequest Config(OptimizerConfig::Kind optimizer, double lr,
                        UpdateMode mode = ASYNC, int workers = 1,
                        int replicas = 1) {
  ConfigureRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.mutable_optimizer()->set_kind(optimizer);
  request.mutable_learning_rate()->set_learning_rate(lr);
  request.set_mode(mode);
  request.set_num_workers(workers);
  request.set_replicas_to_aggregate(replicas);
  return request;
}

VariableSpec Spec(const std::string& name, int64_t size,
                  VariableSpec::Update update, float momentum) {
  VariableSpec spec;
  spec.set_name(name);
  spec.add_shape(size);
  spec.set_update(update);
  spec.set_momentum(momentum);
  return spec;
}

VariableSpec Average(const std::string& name, int64_t size, float momentum) {
  return Spec(name, size, VariableSpec::MOVING_AVERAGE, momentum);
}

CreateVariablesRequest Create(std::vector<VariableSpec> specs) {
  CreateVariablesRequest request;
  request.set_protocol_version(kProtocolVersion);
  for (VariableSpec& spec : specs) *request.add_variables() = std::move(spec);
  return request;
}

PushRequest Header(int64_t version = 0, int worker = 0) {
  PushRequest request;
  request.set_version(version);
  request.set_worker_index(worker);
  return request;
}

class MovingAverageTest : public ::testing::Test {
 protected:
  MovingAverageTest() : core_(ParameterServerCore::Options{kChunkBytes}) {}

  // Configures the server and creates "mean" (6 elements, chunks of 4 and
  // 2) as a moving average with `momentum`.
  void Start(const ConfigureRequest& config, float momentum) {
    ASSERT_OK(core_.Configure(config));
    ASSERT_OK(core_.CreateVariables(Create({Average("mean", 6, momentum)})));
  }

  ChunkRef Ref(int64_t offset, int64_t count) {
    absl::StatusOr<ChunkRef> ref =
        core_.Resolve(kProtocolVersion, "mean", offset, count);
    EXPECT_OK(ref);
    return *ref;
  }

  // The last chunk (elements 4 and 5).
  std::vector<float> Tail() {
    std::vector<float> out(2);
    core_.Pull(Ref(4, 2), absl::MakeSpan(out));
    return out;
  }

  ParameterServerCore core_;
};

// Momentum 0.75 and dyadic values keep every step exact in float, so the
// comparison is exact. The schedule (lr halves per update) and the
// staleness-aware rate (every push is stale) would change any optimizer
// update, and must not touch this one.
TEST_F(MovingAverageTest, AsyncPushesFollowTheFormulaExactly) {
  ConfigureRequest config = Config(OptimizerConfig::SGD, 0.5);
  config.mutable_learning_rate()->set_kind(
      LearningRateSchedule::EXPONENTIAL_DECAY);
  config.mutable_learning_rate()->set_decay_steps(1);
  config.mutable_learning_rate()->set_decay_rate(0.5);
  config.set_staleness_aware_learning_rate(true);
  Start(config, 0.75f);
  const std::vector<float> start = {1.0f, -2.0f};  // e.g. a variance's 1s
  ASSERT_OK(core_.Assign(Ref(4, 2), start));
  const std::vector<std::vector<float>> pushes = {
      {4.0f, 8.0f}, {-4.0f, 0.5f}, {0.0f, 2.0f}, {16.0f, -8.0f}};
  std::vector<float> expected = start;
  int64_t version = 0;
  for (const std::vector<float>& x : pushes) {
    ASSERT_OK_AND_ASSIGN(PushResponse response,
                         core_.Push(Ref(4, 2), Header(/*version=*/0), x));
    EXPECT_EQ(response.version(), ++version);
    for (size_t i = 0; i < x.size(); ++i) {
      expected[i] = 0.75f * expected[i] + (1.0f - 0.75f) * x[i];
    }
    EXPECT_EQ(Tail(), expected) << "after push " << version;
  }
  EXPECT_THAT(expected, ElementsAre(4.17578125f, -1.34375f));  // by hand
  EXPECT_EQ(core_.Stats().updates_applied(), 4);
}

// A realistic momentum is not exact in binary: within a float's rounding.
TEST_F(MovingAverageTest, AsyncPushesWithAnInexactMomentumMatchTheFormula) {
  Start(Config(OptimizerConfig::ADAM, 0.1), 0.99f);
  const std::vector<float> x = {3.0f, -1.0f};
  double expected = 0;
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK(core_.Push(Ref(4, 2), Header(i), x));
    expected = 0.99 * expected + 0.01 * 3.0;
  }
  EXPECT_NEAR(Tail()[0], expected, 1e-5);
  EXPECT_NEAR(Tail()[1], -expected / 3.0, 1e-5);
}

TEST_F(MovingAverageTest, SyncAppliesTheMeanOfTheReplicasOncePerStep) {
  Start(Config(OptimizerConfig::SGD, 1.0, SYNC, 2, 2), 0.5f);
  const std::vector<float> a0 = {4, 0}, b0 = {8, 2};  // mean (6, 1)
  ASSERT_OK_AND_ASSIGN(auto first, core_.Push(Ref(4, 2), Header(0, 0), a0));
  EXPECT_EQ(first.version(), 0);
  EXPECT_THAT(Tail(), Each(0.0f)) << "applied before both replicas arrived";
  ASSERT_OK_AND_ASSIGN(auto second, core_.Push(Ref(4, 2), Header(0, 1), b0));
  EXPECT_EQ(second.version(), 1);
  EXPECT_THAT(Tail(), ElementsAre(3.0f, 0.5f));        // 0.5 * 0 + 0.5 * mean
  const std::vector<float> a1 = {2, -1}, b1 = {6, 3};  // mean (4, 1)
  ASSERT_OK(core_.Push(Ref(4, 2), Header(1, 1), b1));
  ASSERT_OK(core_.Push(Ref(4, 2), Header(1, 0), a1));
  EXPECT_THAT(Tail(), ElementsAre(3.5f, 0.75f));
  EXPECT_EQ(core_.Stats().updates_applied(), 2);
}

TEST_F(MovingAverageTest, SyncDuplicateAndStalePushesAreHandledAsGradients) {
  Start(Config(OptimizerConfig::SGD, 1.0, SYNC, 3, 2), 0.5f);
  const std::vector<float> x = {4, 4}, y = {8, 8};
  ASSERT_OK(core_.Push(Ref(4, 2), Header(0, 0), x));
  ASSERT_OK_AND_ASSIGN(auto again, core_.Push(Ref(4, 2), Header(0, 0), y));
  EXPECT_EQ(again.version(), 0) << "a retried push must not complete a step";
  ASSERT_OK(core_.Push(Ref(4, 2), Header(0, 1), y));
  // Worker 0 counted once, with its first value: mean (4 + 8) / 2 = 6.
  EXPECT_THAT(Tail(), Each(3.0f));
  // Worker 2 is a backup: its value for step 0 comes too late.
  EXPECT_THAT(core_.Push(Ref(4, 2), Header(0, 2), y),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("computed at step 0 is stale")));
  EXPECT_EQ(core_.Stats().stale_gradients_dropped(), 1);
  EXPECT_THAT(Tail(), Each(3.0f));
}

TEST_F(MovingAverageTest, NonFinitePushesAreRejectedAndChangeNothing) {
  Start(Config(OptimizerConfig::SGD, 1.0), 0.5f);
  ASSERT_OK(core_.Push(Ref(4, 2), Header(), std::vector<float>{2, 2}));
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    EXPECT_THAT(
        core_.Push(Ref(4, 2), Header(), std::vector<float>{1, bad}),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 AllOf(HasSubstr("\"mean\""), HasSubstr("is not finite"))));
  }
  EXPECT_THAT(Tail(), Each(1.0f));
  EXPECT_EQ(core_.Stats().nonfinite_gradients_rejected(), 3);
  EXPECT_EQ(core_.Stats().updates_applied(), 1);
}

TEST_F(MovingAverageTest, MomentumOutsideZeroToOneIsRejectedNamingIt) {
  ASSERT_OK(core_.Configure(Config(OptimizerConfig::SGD, 1.0)));
  for (float bad : {-0.1f, 1.0f, 1.5f, std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_THAT(
        core_.CreateVariables(Create({Spec("ok", 2, VariableSpec::OPTIMIZER, 0),
                                      Average("bn/moving_mean", 2, bad)})),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 AllOf(HasSubstr("\"bn/moving_mean\" is a moving average "
                                 "with momentum"),
                       HasSubstr(absl::StrCat(bad)), HasSubstr("[0, 1)"))))
        << bad;
  }
  EXPECT_EQ(core_.Stats().num_variables(), 0) << "a bad request creates none";
  EXPECT_OK(core_.CreateVariables(Create({Average("zero", 2, 0.0f)})));
}

TEST_F(MovingAverageTest, UnknownRulesAndStrayMomentumsAreRejected) {
  ASSERT_OK(core_.Configure(Config(OptimizerConfig::SGD, 1.0)));
  EXPECT_THAT(core_.CreateVariables(Create(
                  {Spec("w", 2, static_cast<VariableSpec::Update>(5), 0)})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"w\" has update rule 5")));
  EXPECT_THAT(
      core_.CreateVariables(
          Create({Spec("w", 2, VariableSpec::OPTIMIZER, 0.9f)})),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("\"w\" has momentum 0.9 but update OPTIMIZER")));
  EXPECT_EQ(core_.Stats().num_variables(), 0);
}

TEST_F(MovingAverageTest, RecreatingWithAnotherRuleOrMomentumFails) {
  Start(Config(OptimizerConfig::SGD, 1.0), 0.9f);
  ASSERT_OK(core_.CreateVariables(
      Create({Spec("w", 6, VariableSpec::OPTIMIZER, 0)})));
  EXPECT_OK(core_.CreateVariables(Create({Average("mean", 6, 0.9f)})));
  EXPECT_THAT(core_.CreateVariables(Create({Average("mean", 6, 0.99f)})),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("\"mean\" exists updated by a moving average "
                                 "with momentum 0.9, not a moving average "
                                 "with momentum 0.99")));
  EXPECT_THAT(core_.CreateVariables(
                  Create({Spec("mean", 6, VariableSpec::OPTIMIZER, 0)})),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("not the optimizer")));
  EXPECT_THAT(core_.CreateVariables(Create({Average("w", 6, 0.9f)})),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("\"w\" exists updated by the optimizer")));
  EXPECT_EQ(core_.Stats().num_variables(), 2);
}

// Adam keeps two slots per trainable element; a moving average keeps none,
// and the memory limit counts exactly that.
TEST(MovingAverageLimitTest, AveragesHoldNoSlotsAndCostOnlyTheirValues) {
  ParameterServerCore::Options options;
  options.chunk_bytes = kChunkBytes;
  options.max_variable_bytes = 100;
  ParameterServerCore core(options);
  ASSERT_OK(core.Configure(Config(OptimizerConfig::ADAM, 0.1)));
  // 20 floats: 80 bytes as an average, 240 with Adam's slots.
  EXPECT_THAT(
      core.CreateVariables(Create({Spec("w", 20, VariableSpec::OPTIMIZER, 0)})),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("needs 240 bytes")));
  ASSERT_OK(core.CreateVariables(Create({Average("mean", 20, 0.5f)})));
  ASSERT_OK_AND_ASSIGN(std::vector<Variable*> variables, core.ListVariables());
  ASSERT_EQ(variables.size(), 1u);
  EXPECT_THAT(variables[0]->slot_names(), ::testing::IsEmpty());
  EXPECT_EQ(variables[0]->update(), VariableUpdate::kMovingAverage);
  EXPECT_THAT(core.CreateVariables(Create({Average("more", 6, 0.5f)})),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("holds 80 of at most 100")));
}

}  // namespace
}  // namespace psflow
