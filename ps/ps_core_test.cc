#include "ps/ps_core.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/float_mode.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Tiny chunks (4 elements) so that multi-chunk paths are exercised.
constexpr int64_t kChunkBytes = 4 * sizeof(float);

ConfigureRequest Sgd(double lr, UpdateMode mode = ASYNC, int workers = 1,
                     int replicas = 1) {
  ConfigureRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  request.mutable_learning_rate()->set_learning_rate(lr);
  request.set_mode(mode);
  request.set_num_workers(workers);
  request.set_replicas_to_aggregate(replicas);
  return request;
}

CreateVariablesRequest Vars(
    std::vector<std::pair<std::string, std::vector<int64_t>>> specs) {
  CreateVariablesRequest request;
  request.set_protocol_version(kProtocolVersion);
  for (auto& [name, shape] : specs) {
    VariableSpec* spec = request.add_variables();
    spec->set_name(name);
    for (int64_t d : shape) spec->add_shape(d);
  }
  return request;
}

PushRequest PushHeader(int64_t version = 0, int worker = 0) {
  PushRequest request;
  request.set_version(version);
  request.set_worker_index(worker);
  return request;
}

class PsCoreTest : public ::testing::Test {
 protected:
  PsCoreTest() : core_(ParameterServerCore::Options{kChunkBytes}) {}

  // Sets up "w" with 10 elements (chunks of 4, 4, 2).
  void SetUpVariable(const ConfigureRequest& config) {
    ASSERT_OK(core_.Configure(config));
    ASSERT_OK(core_.CreateVariables(Vars({{"w", {2, 5}}})));
  }

  ChunkRef Ref(int64_t offset, int64_t count, const std::string& name = "w") {
    absl::StatusOr<ChunkRef> ref =
        core_.Resolve(kProtocolVersion, name, offset, count);
    EXPECT_OK(ref);
    return *ref;
  }

  std::vector<float> ReadAll() {
    std::vector<float> all;
    for (int64_t offset = 0; offset < 10; offset += 4) {
      int64_t n = std::min<int64_t>(4, 10 - offset);
      std::vector<float> part(n);
      core_.Pull(Ref(offset, n), absl::MakeSpan(part));
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }

  ParameterServerCore core_;
};

// The optimizer runs on whichever thread serves the push (gRPC's pool,
// the shared-memory sessions'), which may not have inherited the server's
// flush-to-zero: the apply sets it on its own thread.
TEST_F(PsCoreTest, ApplyingAGradientFlushesSubnormalsOnItsThread) {
  SetUpVariable(Sgd(0.1));
  bool before = true, after = false;
  std::thread pool_thread([&] {
    DisableFlushToZero();
    before = FlushToZeroEnabled();
    const std::vector<float> gradient(4, 1.0f);
    EXPECT_OK(core_.Push(Ref(0, 4), PushHeader(), gradient));
    after = FlushToZeroEnabled();
  });
  pool_thread.join();
  EXPECT_FALSE(before);
  EXPECT_TRUE(after);
}

TEST_F(PsCoreTest, ConfigureReportsTheChunkSize) {
  ASSERT_OK_AND_ASSIGN(ConfigureResponse response, core_.Configure(Sgd(0.1)));
  EXPECT_EQ(response.chunk_elements(), 4);
}

TEST_F(PsCoreTest, RepeatingAnIdenticalConfigureIsANoOp) {
  ASSERT_OK(core_.Configure(Sgd(0.1)));
  EXPECT_OK(core_.Configure(Sgd(0.1)));
}

TEST_F(PsCoreTest, ConfiguringDifferentlyIsRefused) {
  ASSERT_OK(core_.Configure(Sgd(0.1)));
  EXPECT_THAT(core_.Configure(Sgd(0.2)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("already configured differently")));
}

TEST_F(PsCoreTest, UnspecifiedModeIsRejected) {
  EXPECT_THAT(core_.Configure(Sgd(0.1, UPDATE_MODE_UNSPECIFIED)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("use ASYNC, SYNC or BOUNDED")));
}

TEST_F(PsCoreTest, BoundedModeNeedsWorkersAndAStalenessInRange) {
  ConfigureRequest bounded = Sgd(0.1, BOUNDED, 0);
  EXPECT_THAT(core_.Configure(bounded),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_workers is 0; bounded mode needs")));
  bounded.set_num_workers(kMaxWorkers + 1);
  EXPECT_THAT(core_.Configure(bounded),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bounded.set_num_workers(4);
  bounded.set_max_staleness(-1);
  EXPECT_THAT(core_.Configure(bounded),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_staleness is -1; use 0..")));
  bounded.set_max_staleness(kMaxStalenessBound + 1);
  EXPECT_THAT(core_.Configure(bounded),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(core_.worker_clocks(), nullptr);
  bounded.set_max_staleness(2);
  // The staleness-aware rate is for bounded mode too.
  bounded.set_staleness_aware_learning_rate(true);
  ASSERT_OK(core_.Configure(bounded));
  ASSERT_NE(core_.worker_clocks(), nullptr);
  EXPECT_FALSE(core_.sync());
  ExcludeWorkersRequest exclude;
  exclude.set_protocol_version(kProtocolVersion);
  exclude.add_workers(3);
  ASSERT_OK(core_.ExcludeWorkers(exclude));
  StatsResponse stats = core_.Stats();
  EXPECT_THAT(stats.worker_clocks(), ::testing::ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(stats.worker_excluded(),
              ::testing::ElementsAre(false, false, false, true));
  exclude.add_workers(4);
  EXPECT_THAT(core_.ExcludeWorkers(exclude),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(PsCoreTest, ExcludeWorkersIsOnlyForBoundedMode) {
  ExcludeWorkersRequest exclude;
  exclude.set_protocol_version(kProtocolVersion);
  EXPECT_THAT(core_.ExcludeWorkers(exclude),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(core_.Configure(Sgd(0.1)));
  EXPECT_THAT(core_.ExcludeWorkers(exclude),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("for BOUNDED mode")));
  EXPECT_EQ(core_.worker_clocks(), nullptr);
  EXPECT_EQ(core_.Stats().worker_clocks_size(), 0);
}

TEST_F(PsCoreTest, SyncReplicasMustFitTheWorkers) {
  EXPECT_THAT(core_.Configure(Sgd(0.1, SYNC, 2, 3)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("replicas_to_aggregate is 3 with 2 workers; "
                                 "use 1..2")));
}

TEST_F(PsCoreTest, BadOptimizerIsRejectedByField) {
  ConfigureRequest request = Sgd(0.1);
  request.mutable_optimizer()->set_kind(OptimizerConfig::KIND_UNSPECIFIED);
  EXPECT_THAT(core_.Configure(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("optimizer.kind is KIND_UNSPECIFIED")));
  request = Sgd(-1);
  EXPECT_THAT(core_.Configure(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("learning_rate is -1")));
}

TEST_F(PsCoreTest, OtherProtocolVersionsAreRefused) {
  ConfigureRequest request = Sgd(0.1);
  request.set_protocol_version(7);
  EXPECT_THAT(core_.Configure(request),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("protocol version 7 from the client")));
}

TEST_F(PsCoreTest, CreatingBeforeConfigureIsRefused) {
  EXPECT_THAT(core_.CreateVariables(Vars({{"w", {3}}})),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("not configured yet")));
}

TEST_F(PsCoreTest, BadShapesAreRejectedAndNothingIsCreated) {
  ASSERT_OK(core_.Configure(Sgd(0.1)));
  EXPECT_THAT(core_.CreateVariables(Vars({{"ok", {3}}, {"bad", {3, 0}}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"bad\" has shape [3, 0]")));
  EXPECT_EQ(core_.Stats().num_variables(), 0);
}

// A create request is sized against the server's limit before anything is
// allocated: a hostile or mistaken 256 GiB variable is refused, naming the
// sizes and the flag, and creates nothing.
TEST(PsCoreLimitTest, VariablesBeyondTheMemoryLimitAreRefusedBeforeAllocating) {
  ParameterServerCore::Options options;
  options.chunk_bytes = 16;
  options.max_variable_bytes = 1000;
  ParameterServerCore core(options);
  ASSERT_OK(core.Configure(Sgd(0.1)));
  ASSERT_OK(core.CreateVariables(Vars({{"a", {200}}})));  // 800 bytes
  EXPECT_THAT(core.CreateVariables(Vars({{"b", {10}}, {"c", {41}}})),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("needs 204 bytes"),
                             HasSubstr("holds 800 of at most 1000"),
                             HasSubstr("--max_variable_bytes"))));
  EXPECT_THAT(core.CreateVariables(Vars({{"huge", {1 << 18, 1 << 18}}})),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(core.Stats().num_variables(), 1);
  // What fits still fits; re-creating an existing variable costs nothing.
  EXPECT_OK(core.CreateVariables(Vars({{"a", {200}}, {"b", {50}}})));
  EXPECT_EQ(core.Stats().total_elements(), 250);
}

TEST_F(PsCoreTest, RecreatingWithTheSameShapeIsANoOpAndAnotherShapeFails) {
  SetUpVariable(Sgd(0.1));
  EXPECT_OK(core_.CreateVariables(Vars({{"w", {2, 5}}})));
  EXPECT_THAT(core_.CreateVariables(Vars({{"w", {10}}})),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("exists with shape [2, 5], not [10]")));
  EXPECT_EQ(core_.Stats().num_variables(), 1);
  EXPECT_EQ(core_.Stats().total_elements(), 10);
}

TEST_F(PsCoreTest, UnknownVariableIsNotFound) {
  SetUpVariable(Sgd(0.1));
  EXPECT_THAT(core_.Resolve(kProtocolVersion, "nope", 0, 4),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("variable \"nope\" is not on this")));
}

TEST_F(PsCoreTest, RangesMustBeExactlyOneChunk) {
  SetUpVariable(Sgd(0.1));
  EXPECT_THAT(core_.Resolve(kProtocolVersion, "w", 2, 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("range [2, 6) is not one chunk")));
  EXPECT_THAT(core_.Resolve(kProtocolVersion, "w", 8, 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("(e.g. 2 elements)")));
  EXPECT_THAT(core_.Resolve(kProtocolVersion, "w", 12, 4),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(core_.Resolve(kProtocolVersion, "w", 8, 2));
}

TEST_F(PsCoreTest, AssignThenPullRoundTripsEveryChunk) {
  SetUpVariable(Sgd(0.1));
  for (int64_t offset = 0; offset < 10; offset += 4) {
    int64_t n = std::min<int64_t>(4, 10 - offset);
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) values[i] = offset + i + 0.5f;
    ASSERT_OK(core_.Assign(Ref(offset, n), values));
  }
  EXPECT_THAT(ReadAll(), ElementsAre(0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f,
                                     7.5f, 8.5f, 9.5f));
}

TEST_F(PsCoreTest, AsyncPushAppliesTheOptimizerAtOnce) {
  SetUpVariable(Sgd(0.5));
  std::vector<float> grad = {1, 2, 3, 4};
  ASSERT_OK_AND_ASSIGN(PushResponse response,
                       core_.Push(Ref(0, 4), PushHeader(), grad));
  EXPECT_EQ(response.version(), 1);
  EXPECT_THAT(ReadAll(),
              ElementsAre(-0.5f, -1.0f, -1.5f, -2.0f, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(core_.Stats().updates_applied(), 1);
}

TEST_F(PsCoreTest, TheScheduleFollowsTheChunkVersion) {
  ConfigureRequest config = Sgd(1.0);
  config.mutable_learning_rate()->set_kind(
      LearningRateSchedule::EXPONENTIAL_DECAY);
  config.mutable_learning_rate()->set_decay_steps(1);
  config.mutable_learning_rate()->set_decay_rate(0.5);
  SetUpVariable(config);
  std::vector<float> grad = {1, 1};
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(), grad));  // lr 1
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(), grad));  // lr 0.5
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(), grad));  // lr 0.25
  EXPECT_THAT(ReadAll(), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, -1.75f, -1.75f));
}

TEST_F(PsCoreTest, NonFiniteGradientsAreRejectedCountedAndChangeNothing) {
  SetUpVariable(Sgd(0.5));
  std::vector<float> nan_grad = {1, NAN, 3, 4};
  EXPECT_THAT(core_.Push(Ref(4, 4), PushHeader(0, 3), nan_grad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("from worker 3"),
                             HasSubstr("value nan at element 5"),
                             HasSubstr("untouched"))));
  std::vector<float> inf_grad = {1, 2, 3, -INFINITY};
  EXPECT_THAT(core_.Push(Ref(4, 4), PushHeader(), inf_grad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("value -inf at element 7")));
  EXPECT_THAT(ReadAll(), Each(0.0f));
  EXPECT_EQ(core_.Stats().nonfinite_gradients_rejected(), 2);
  EXPECT_EQ(core_.Stats().updates_applied(), 0);
}

// A batch the caller checked whole and then read where it lies (a
// client's shared memory) may have changed in between: a value that is no
// longer finite is applied as 0, in either mode, and never reaches the
// variable.
TEST_F(PsCoreTest, ValuesThatStoppedBeingFiniteAfterTheCheckAreApplied0) {
  for (UpdateMode mode : {ASYNC, SYNC}) {
    ParameterServerCore core(ParameterServerCore::Options{kChunkBytes});
    ASSERT_OK(core.Configure(Sgd(1.0, mode, 2, mode == SYNC ? 2 : 1)));
    ASSERT_OK(core.CreateVariables(Vars({{"w", {4}}})));
    ASSERT_OK_AND_ASSIGN(ChunkRef ref,
                         core.Resolve(kProtocolVersion, "w", 0, 4));
    const std::vector<float> changed = {2, NAN, 2, -INFINITY};
    const std::vector<float> fine = {2, 2, 2, 2};
    const absl::Span<const float> first = changed, second = fine;
    ASSERT_OK(core.PushBatch({&ref, 1}, 0, 0, {&first, 1},
                             ParameterServerCore::Finite::kChecked));
    ASSERT_OK(core.PushBatch({&ref, 1}, mode == SYNC ? 0 : 1, 1, {&second, 1},
                             ParameterServerCore::Finite::kChecked));
    std::vector<float> w(4);
    core.Pull(ref, absl::MakeSpan(w));
    // ASYNC: two steps of lr 1; SYNC: one step of the mean.
    if (mode == ASYNC) {
      EXPECT_THAT(w, ElementsAre(-4.0f, -2.0f, -4.0f, -2.0f));
    } else {
      EXPECT_THAT(w, ElementsAre(-2.0f, -1.0f, -2.0f, -1.0f));
    }
  }
}

TEST_F(PsCoreTest, WrongGradientSizeIsRejected) {
  SetUpVariable(Sgd(0.5));
  std::vector<float> grad = {1, 2, 3};
  EXPECT_THAT(core_.Push(Ref(0, 4), PushHeader(), grad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("3 gradient values for a chunk of 4")));
}

TEST_F(PsCoreTest, ConcurrentAsyncPushesNeverLoseAnUpdate) {
  SetUpVariable(Sgd(1.0));
  constexpr int kThreads = 8;
  constexpr int kPushes = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPushes; ++i) {
        for (int64_t offset = 0; offset < 10; offset += 4) {
          int64_t n = std::min<int64_t>(4, 10 - offset);
          std::vector<float> grad(n, -1.0f);
          ASSERT_OK(core_.Push(Ref(offset, n), PushHeader(), grad));
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  // Integers below 2^24 are exact in float: any lost update would show.
  EXPECT_THAT(ReadAll(), Each(float{kThreads * kPushes}));
  EXPECT_EQ(core_.Stats().updates_applied(), kThreads * kPushes * 3);
}

// Every push computed from version 0 of one chunk: whatever the order, the
// k-th applied one had k updates before it, so the stalenesses are exactly
// 0, 1, ..., N-1.
TEST_F(PsCoreTest, ConcurrentAsyncPushesRecordEachOnesStaleness) {
  SetUpVariable(Sgd(0.001));
  constexpr int kThreads = 4;
  constexpr int kPushes = 250;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<float> grad = {1, 1};
      for (int i = 0; i < kPushes; ++i) {
        ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(/*version=*/0), grad));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const StatsResponse stats = core_.Stats();
  constexpr int64_t kTotal = kThreads * kPushes;
  EXPECT_EQ(stats.staleness_sum(), kTotal * (kTotal - 1) / 2);
  // Bucket b holds stalenesses up to 2^b - 1: 1, 1, 2, 4, ... of them.
  EXPECT_THAT(stats.staleness_counts(),
              ElementsAre(1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 488, 0));
}

// lr 1, g = 1: a gradient k updates late moves the weight by 1 / (k + 1).
TEST_F(PsCoreTest, StalenessAwareLearningRateDividesByStalenessPlusOne) {
  ConfigureRequest config = Sgd(1.0);
  config.set_staleness_aware_learning_rate(true);
  SetUpVariable(config);
  std::vector<float> g = {1, 1};
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0), g));  // fresh: -1
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0), g));  // 1 late: -1/2
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0), g));  // 2 late: -1/3
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(3), g));  // fresh again: -1
  const float expected = -(1.0f + 0.5f + 1.0f / 3.0f + 1.0f);
  const std::vector<float> values = ReadAll();
  EXPECT_FLOAT_EQ(values[8], expected);
  EXPECT_FLOAT_EQ(values[9], expected);
  EXPECT_EQ(values[0], 0.0f) << "other chunks untouched";
}

TEST_F(PsCoreTest, WithoutStalenessAwarenessLateGradientsMoveAsFar) {
  SetUpVariable(Sgd(1.0));
  std::vector<float> g = {1, 1};
  for (int i = 0; i < 3; ++i)
    ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0), g));
  EXPECT_THAT(ReadAll(), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, -3.0f, -3.0f));
}

TEST_F(PsCoreTest, StalenessAwareLearningRateIsRefusedInSync) {
  ConfigureRequest config = Sgd(1.0, SYNC, 2, 2);
  config.set_staleness_aware_learning_rate(true);
  EXPECT_THAT(core_.Configure(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("applies to ASYNC only")));
}

// Versions are the client's word: extreme ones count as the most or the
// least stale possible, never overflow (UBSan checks the arithmetic).
TEST_F(PsCoreTest, ExtremePushVersionsAreClampedNotOverflowed) {
  ConfigureRequest config = Sgd(1.0);
  config.set_staleness_aware_learning_rate(true);
  SetUpVariable(config);
  std::vector<float> g = {1, 1};
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0), g));  // version 1 now
  ASSERT_OK(core_.Push(Ref(8, 2),
                       PushHeader(std::numeric_limits<int64_t>::min()), g));
  ASSERT_OK(core_.Push(Ref(8, 2),
                       PushHeader(std::numeric_limits<int64_t>::max()), g));
  const StatsResponse stats = core_.Stats();
  EXPECT_EQ(stats.staleness_sum(), 0 + 1 + 0);
  // -1, then -1/2 (1 late), then -1 (claims the future: fresh).
  EXPECT_FLOAT_EQ(ReadAll()[8], -2.5f);
}

TEST_F(PsCoreTest, FreshGradientsAreNotStale) {
  SetUpVariable(Sgd(1.0, SYNC, 2, 2));
  std::vector<float> g = {1, 1};
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0, 0), g));  // accumulated
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0, 1), g));  // applied
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(1, 0), g));
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(1, 0), g));  // duplicate
  const StatsResponse stats = core_.Stats();
  EXPECT_EQ(stats.staleness_counts(0), 3);
  EXPECT_EQ(stats.staleness_sum(), 0);
}

TEST_F(PsCoreTest, SyncAppliesTheAverageOnceAllReplicasArrived) {
  SetUpVariable(Sgd(1.0, SYNC, 3, 3));
  std::vector<float> g0 = {3, 0}, g1 = {0, 3}, g2 = {3, 3};
  ASSERT_OK_AND_ASSIGN(auto r0, core_.Push(Ref(8, 2), PushHeader(0, 0), g0));
  ASSERT_OK_AND_ASSIGN(auto r1, core_.Push(Ref(8, 2), PushHeader(0, 1), g1));
  EXPECT_EQ(r1.version(), 0);
  EXPECT_THAT(ReadAll(), Each(0.0f)) << "applied before K gradients";
  ASSERT_OK_AND_ASSIGN(auto r2, core_.Push(Ref(8, 2), PushHeader(0, 2), g2));
  EXPECT_EQ(r2.version(), 1);
  EXPECT_THAT(ReadAll(), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, -2.0f, -2.0f));
  EXPECT_EQ(core_.Stats().updates_applied(), 1);
}

TEST_F(PsCoreTest, SyncCountsAWorkerOncePerStep) {
  SetUpVariable(Sgd(1.0, SYNC, 2, 2));
  std::vector<float> g = {2, 2};
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0, 0), g));
  ASSERT_OK_AND_ASSIGN(auto again, core_.Push(Ref(8, 2), PushHeader(0, 0), g));
  EXPECT_EQ(again.version(), 0) << "a retried push must not complete a step";
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0, 1), g));
  EXPECT_THAT(ReadAll(), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, -2.0f, -2.0f));
}

TEST_F(PsCoreTest, SyncBackupWorkersGradientsAreDroppedAsStale) {
  SetUpVariable(Sgd(1.0, SYNC, 3, 2));
  std::vector<float> g = {1, 1};
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0, 2), g));
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(0, 0), g));
  EXPECT_THAT(core_.Push(Ref(8, 2), PushHeader(0, 1), g),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("computed at step 0 is stale; the chunk is "
                                 "at step 1")));
  EXPECT_EQ(core_.Stats().stale_gradients_dropped(), 1);
  EXPECT_THAT(ReadAll(), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, -1.0f, -1.0f));
}

TEST_F(PsCoreTest, SyncGradientFromTheFutureIsRejected) {
  SetUpVariable(Sgd(1.0, SYNC, 2, 2));
  std::vector<float> g = {1, 1};
  EXPECT_THAT(core_.Push(Ref(8, 2), PushHeader(5, 0), g),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("claims step 5 but the chunk is at step 0")));
}

TEST_F(PsCoreTest, AdamSlotsLiveBesideTheVariable) {
  ConfigureRequest config = Sgd(0.1);
  config.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  SetUpVariable(config);
  std::vector<float> grad = {0.5f, 0.5f};
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(), grad));
  ASSERT_OK(core_.Push(Ref(8, 2), PushHeader(), grad));
  std::vector<float> all = ReadAll();
  // Two equal gradients: each step moves by lr (bias-corrected m/sqrt(v)=1).
  EXPECT_NEAR(all[8], -0.2f, 1e-6);
  EXPECT_NEAR(all[9], -0.2f, 1e-6);
}

}  // namespace
}  // namespace psflow

namespace psflow {
namespace {

// ---- Gradients read where they lie (ps/gradient.h) -------------------------

// A core with one variable "big" of one 4 MiB chunk, its apply split over 2
// threads (above the inline threshold), under `config`.
std::unique_ptr<ParameterServerCore> BigCore(const ConfigureRequest& config) {
  ParameterServerCore::Options options;
  options.chunk_bytes = 4 << 20;
  options.apply_threads = 2;
  auto core = std::make_unique<ParameterServerCore>(options);
  EXPECT_OK(core->Configure(config));
  EXPECT_OK(core->CreateVariables(Vars({{"big", {1 << 20}}})));
  return core;
}

ConfigureRequest Adam() {
  ConfigureRequest config = Sgd(0.01);
  config.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  return config;
}

// Pushes `grad` to "big" as a gradient read block by block (as a TCP push
// is read out of gRPC's slices).
absl::StatusOr<PushBatchResponse> PushRead(ParameterServerCore& core,
                                           const std::vector<float>& grad,
                                           int64_t version, int worker) {
  const ChunkRef ref = *core.Resolve(kProtocolVersion, "big", 0, 1 << 20);
  auto read = [&grad](int64_t begin, absl::Span<float> out) {
    std::copy(grad.begin() + begin, grad.begin() + begin + out.size(),
              out.begin());
  };
  const Gradient gradient(static_cast<int64_t>(grad.size()), read);
  return core.PushBatch({&ref, 1}, version, worker, {&gradient, 1},
                        ParameterServerCore::Finite::kUnchecked);
}

std::vector<float> Values(ParameterServerCore& core) {
  const ChunkRef ref = *core.Resolve(kProtocolVersion, "big", 0, 1 << 20);
  const absl::Span<const float> values = core.View(ref).values;
  return std::vector<float>(values.begin(), values.end());
}

std::vector<float> SomeGradient(float scale) {
  std::vector<float> grad(1 << 20);
  for (size_t i = 0; i < grad.size(); ++i) {
    grad[i] = scale * static_cast<float>(static_cast<int>(i % 97) - 48);
  }
  return grad;
}

TEST(ReadGradientTest, ReadPushAppliesBitForBitAsASpanPush) {
  for (const ConfigureRequest& config : {Sgd(0.5), Adam()}) {
    std::unique_ptr<ParameterServerCore> by_span = BigCore(config);
    std::unique_ptr<ParameterServerCore> by_read = BigCore(config);
    const ChunkRef ref = *by_span->Resolve(kProtocolVersion, "big", 0, 1 << 20);
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> grad = SomeGradient(0.001f * (step + 1));
      const absl::Span<const float> span = grad;
      ASSERT_OK(by_span->PushBatch({&ref, 1}, step, 0, {&span, 1}));
      ASSERT_OK(PushRead(*by_read, grad, step, 0));
    }
    EXPECT_EQ(Values(*by_read), Values(*by_span))
        << config.optimizer().ShortDebugString();
  }
}

TEST(ReadGradientTest, SyncAggregatesReadGradientsAsSpans) {
  const ConfigureRequest config = Sgd(0.5, SYNC, 2, 2);
  std::unique_ptr<ParameterServerCore> by_span = BigCore(config);
  std::unique_ptr<ParameterServerCore> by_read = BigCore(config);
  const ChunkRef ref = *by_span->Resolve(kProtocolVersion, "big", 0, 1 << 20);
  for (int worker = 0; worker < 2; ++worker) {
    const std::vector<float> grad = SomeGradient(0.25f * (worker + 1));
    const absl::Span<const float> span = grad;
    ASSERT_OK(by_span->PushBatch({&ref, 1}, 0, worker, {&span, 1}));
    ASSERT_OK(PushRead(*by_read, grad, 0, worker));
  }
  EXPECT_EQ(by_read->Stats().updates_applied(), 1);
  EXPECT_EQ(Values(*by_read), Values(*by_span));
}

TEST(ReadGradientTest, ANonFiniteValueInAnyBlockRejectsTheReadPush) {
  std::unique_ptr<ParameterServerCore> core = BigCore(Sgd(0.5));
  std::vector<float> grad = SomeGradient(0.001f);
  grad[3 * Gradient::kBlockFloats + 5] = NAN;
  EXPECT_THAT(
      PushRead(*core, grad, 0, 1),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("from worker 1"),
                     HasSubstr(absl::StrCat("value nan at element ",
                                            3 * Gradient::kBlockFloats + 5)))));
  EXPECT_THAT(Values(*core), Each(0.0f));
  EXPECT_EQ(core->Stats().nonfinite_gradients_rejected(), 1);
}

}  // namespace
}  // namespace psflow
