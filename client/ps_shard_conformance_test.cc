// One suite, two transports: every PsShard behaviour is checked against the
// in-process twin and against a real gRPC server on 127.0.0.1.
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "client/grpc_ps_shard.h"
#include "client/local_ps_shard.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "ps/grpc_ps_server.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kChunk = 4;  // elements; tiny so multi-chunk paths run

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

// A server plus a shard talking to it.
struct Harness {
  virtual ~Harness() = default;
  virtual PsShard& shard() = 0;
};

struct LocalHarness : Harness {
  LocalHarness()
      : core(ParameterServerCore::Options{kChunk * sizeof(float)}),
        local(&core, "ps-0 (in-process)") {}
  PsShard& shard() override { return local; }
  ParameterServerCore core;
  LocalPsShard local;
};

struct GrpcHarness : Harness {
  explicit GrpcHarness(const GrpcPsShard::Options& client_options) {
    GrpcParameterServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.core.chunk_bytes = kChunk * sizeof(float);
    options.grace = absl::Milliseconds(200);
    server = *GrpcParameterServer::Start(options);
    remote = std::make_unique<GrpcPsShard>(
        absl::StrCat("127.0.0.1:", server->port()), "ps-0", client_options);
  }
  PsShard& shard() override { return *remote; }
  std::unique_ptr<GrpcParameterServer> server;
  std::unique_ptr<GrpcPsShard> remote;
};

enum class Transport { kLocal, kGrpc, kGrpcOneChunkInFlight };

class PsShardConformanceTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    GrpcPsShard::Options options;
    switch (GetParam()) {
      case Transport::kLocal:
        harness_ = std::make_unique<LocalHarness>();
        break;
      case Transport::kGrpc:
        harness_ = std::make_unique<GrpcHarness>(options);
        break;
      case Transport::kGrpcOneChunkInFlight:
        // Every other call queues in the client: exercises the budget.
        options.max_in_flight_bytes = kChunk * sizeof(float);
        options.connections = 3;
        harness_ = std::make_unique<GrpcHarness>(options);
        break;
    }
  }

  PsShard& shard() { return harness_->shard(); }

  void Setup(UpdateMode mode, int workers = 1, int replicas = 1) {
    ConfigureRequest config;
    config.set_protocol_version(kProtocolVersion);
    config.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    config.mutable_learning_rate()->set_learning_rate(1.0);
    config.set_mode(mode);
    config.set_num_workers(workers);
    config.set_replicas_to_aggregate(replicas);
    ASSERT_OK_AND_ASSIGN(ConfigureResponse response,
                         shard().Configure(config, Soon()));
    ASSERT_EQ(response.chunk_elements(), kChunk);
    CreateVariablesRequest create;
    create.set_protocol_version(kProtocolVersion);
    VariableSpec* spec = create.add_variables();
    spec->set_name("w");
    spec->add_shape(10);
    ASSERT_OK(shard().CreateVariables(create, Soon()));
  }

  absl::StatusOr<PullResponse> Pull(int64_t offset, std::vector<float>& out,
                                    int64_t min_version = 0,
                                    absl::Time deadline = Soon()) {
    PullRequest header;
    header.set_protocol_version(kProtocolVersion);
    header.set_variable("w");
    header.set_offset_elements(offset);
    header.set_num_elements(out.size());
    header.set_min_version(min_version);
    absl::Notification done;
    absl::StatusOr<PullResponse> result;
    shard().Pull(header, absl::MakeSpan(out), deadline,
                 [&](absl::StatusOr<PullResponse> r) {
                   result = std::move(r);
                   done.Notify();
                 });
    done.WaitForNotification();
    return result;
  }

  absl::StatusOr<PushResponse> Push(int64_t offset, std::vector<float> grad,
                                    int64_t version = 0, int worker = 0,
                                    const std::string& variable = "w",
                                    uint32_t protocol = kProtocolVersion) {
    PushRequest header;
    header.set_protocol_version(protocol);
    header.set_variable(variable);
    header.set_offset_elements(offset);
    header.set_num_elements(grad.size());
    header.set_version(version);
    header.set_worker_index(worker);
    auto owner = std::make_shared<std::vector<float>>(std::move(grad));
    absl::Notification done;
    absl::StatusOr<PushResponse> result;
    shard().Push(header, *owner, owner, Soon(),
                 [&](absl::StatusOr<PushResponse> r) {
                   result = std::move(r);
                   done.Notify();
                 });
    done.WaitForNotification();
    return result;
  }

  absl::Status Assign(int64_t offset, std::vector<float> values) {
    AssignRequest header;
    header.set_protocol_version(kProtocolVersion);
    header.set_variable("w");
    header.set_offset_elements(offset);
    header.set_num_elements(values.size());
    auto owner = std::make_shared<std::vector<float>>(std::move(values));
    absl::Notification done;
    absl::Status result;
    shard().Assign(header, *owner, owner, Soon(), [&](absl::Status s) {
      result = s;
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }

  std::vector<float> ReadAll() {
    std::vector<float> all;
    for (int64_t offset : {0, 4, 8}) {
      std::vector<float> part(offset == 8 ? 2 : 4);
      EXPECT_OK(Pull(offset, part));
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }

  std::unique_ptr<Harness> harness_;
};

TEST_P(PsShardConformanceTest, AssignedValuesArePulledBack) {
  Setup(ASYNC);
  ASSERT_OK(Assign(0, {1, 2, 3, 4}));
  ASSERT_OK(Assign(4, {5, 6, 7, 8}));
  ASSERT_OK(Assign(8, {9, 10}));
  EXPECT_THAT(ReadAll(), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9, 10));
}

TEST_P(PsShardConformanceTest, AsyncPushIsAppliedOnArrival) {
  Setup(ASYNC);
  ASSERT_OK_AND_ASSIGN(PushResponse response, Push(8, {1.5f, -2.0f}));
  EXPECT_EQ(response.version(), 1);
  EXPECT_THAT(ReadAll(), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, -1.5f, 2.0f));
}

TEST_P(PsShardConformanceTest, PullOfUnknownVariableIsNotFound) {
  Setup(ASYNC);
  EXPECT_THAT(Push(0, {1, 1, 1, 1}, 0, 0, "missing"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("variable \"missing\" is not on this")));
}

TEST_P(PsShardConformanceTest, MisalignedRangeIsInvalidArgument) {
  Setup(ASYNC);
  std::vector<float> out(3);
  EXPECT_THAT(Pull(1, out), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("is not one chunk")));
}

TEST_P(PsShardConformanceTest, NonFiniteGradientIsRejectedAndChangesNothing) {
  Setup(ASYNC);
  EXPECT_THAT(Push(4, {1, 2, std::numeric_limits<float>::quiet_NaN(), 4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("value nan at element 6")));
  EXPECT_THAT(ReadAll(), Each(0.0f));
  ASSERT_OK_AND_ASSIGN(StatsResponse stats, shard().Stats(Soon()));
  EXPECT_EQ(stats.nonfinite_gradients_rejected(), 1);
}

TEST_P(PsShardConformanceTest, OtherProtocolVersionIsRefused) {
  Setup(ASYNC);
  EXPECT_THAT(Push(0, {1, 1, 1, 1}, 0, 0, "w", kProtocolVersion + 1),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("run the same psflow release")));
}

TEST_P(PsShardConformanceTest, SyncPullWaitsForTheStepThenAnswers) {
  Setup(SYNC, 2, 2);
  ASSERT_OK(Push(0, {2, 2, 2, 2}, 0, 0));
  absl::Notification pulled;
  std::vector<float> out(4);
  absl::StatusOr<PullResponse> result;
  std::thread puller([&] {
    result = Pull(0, out, /*min_version=*/1);
    pulled.Notify();
  });
  EXPECT_FALSE(pulled.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  ASSERT_OK(Push(0, {4, 4, 4, 4}, 0, 1));
  puller.join();
  ASSERT_OK(result);
  EXPECT_EQ(result->version(), 1);
  EXPECT_THAT(out, Each(-3.0f));
}

// A worker that prefetches the next step's values while pushing this
// step's gradient must not deadlock, however small the client's budget.
TEST_P(PsShardConformanceTest, WaitingPullDoesNotBlockThePushCompletingIt) {
  Setup(SYNC, 1, 1);
  std::vector<float> out(4);
  absl::StatusOr<PullResponse> pulled;
  std::thread prefetch([&] { pulled = Pull(0, out, /*min_version=*/1); });
  absl::SleepFor(absl::Milliseconds(50));  // The pull is waiting by now.
  ASSERT_OK(Push(0, {1, 1, 1, 1}, 0, 0));
  prefetch.join();
  ASSERT_OK(pulled);
  EXPECT_EQ(pulled->version(), 1);
  EXPECT_THAT(out, Each(-1.0f));
}

TEST_P(PsShardConformanceTest, SyncPullGivesUpAtItsDeadline) {
  Setup(SYNC, 2, 2);
  std::vector<float> out(4);
  EXPECT_THAT(Pull(0, out, 1, absl::Now() + absl::Milliseconds(100)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_P(PsShardConformanceTest, StaleSyncGradientIsAborted) {
  Setup(SYNC, 2, 1);
  ASSERT_OK(Push(0, {1, 1, 1, 1}, 0, 0));
  EXPECT_THAT(Push(0, {1, 1, 1, 1}, 0, 1),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("stale")));
  ASSERT_OK_AND_ASSIGN(StatsResponse stats, shard().Stats(Soon()));
  EXPECT_EQ(stats.stale_gradients_dropped(), 1);
}

TEST_P(PsShardConformanceTest, ConcurrentPushesSumExactly) {
  Setup(ASYNC);
  constexpr int kThreads = 4;
  constexpr int kPushes = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPushes; ++i) {
        ASSERT_OK(Push(0, {-1, -1, -1, -1}));
        ASSERT_OK(Push(8, {-1, -2}));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  constexpr float kN = kThreads * kPushes;
  EXPECT_THAT(ReadAll(), ElementsAre(kN, kN, kN, kN, 0, 0, 0, 0, kN, 2 * kN));
  ASSERT_OK_AND_ASSIGN(StatsResponse stats, shard().Stats(Soon()));
  EXPECT_EQ(stats.updates_applied(), 2 * kThreads * kPushes);
}

TEST_P(PsShardConformanceTest, ConfiguringTwiceDifferentlyIsRefused) {
  Setup(ASYNC);
  ConfigureRequest other;
  other.set_protocol_version(kProtocolVersion);
  other.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  other.mutable_learning_rate()->set_learning_rate(0.1);
  other.set_mode(ASYNC);
  EXPECT_THAT(shard().Configure(other, Soon()),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_P(PsShardConformanceTest, ShutdownIsAcknowledged) {
  Setup(ASYNC);
  EXPECT_OK(shard().Shutdown("test over", Soon()));
}

INSTANTIATE_TEST_SUITE_P(Transports, PsShardConformanceTest,
                         ::testing::Values(Transport::kLocal, Transport::kGrpc,
                                           Transport::kGrpcOneChunkInFlight),
                         [](const auto& info) {
                           switch (info.param) {
                             case Transport::kLocal:
                               return std::string("InProcess");
                             case Transport::kGrpc:
                               return std::string("Grpc");
                             case Transport::kGrpcOneChunkInFlight:
                               return std::string("GrpcOneChunkInFlight");
                           }
                           return std::string("Unknown");
                         });

}  // namespace
}  // namespace psflow
