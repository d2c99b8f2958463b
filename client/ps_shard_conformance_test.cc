// One suite, two transports: every PsShard behaviour is checked against the
// in-process twin and against a real gRPC server on 127.0.0.1.
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "client/grpc_ps_shard.h"
#include "client/local_ps_shard.h"
#include "client/ps_shard_test_util.h"
#include "client/shared_memory_shard.h"
#include "common/mutex.h"
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

// The gRPC transport, behind the shared-memory decorator when
// `shared_memory_bytes` > 0.
struct GrpcHarness : Harness {
  GrpcHarness(const GrpcPsShard::Options& client_options,
              int64_t shared_memory_bytes = 0) {
    GrpcParameterServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.core.chunk_bytes = kChunk * sizeof(float);
    options.grace = absl::Milliseconds(200);
    server = *GrpcParameterServer::Start(options);
    auto transport = std::make_unique<GrpcPsShard>(
        absl::StrCat("127.0.0.1:", server->port()), "ps-0", client_options);
    if (shared_memory_bytes > 0) {
      shared = std::make_unique<SharedMemoryShard>(std::move(transport),
                                                   shared_memory_bytes);
    } else {
      remote = std::move(transport);
    }
  }
  PsShard& shard() override {
    return shared != nullptr ? static_cast<PsShard&>(*shared) : *remote;
  }
  std::unique_ptr<GrpcParameterServer> server;
  std::unique_ptr<GrpcPsShard> remote;        // TCP only
  std::unique_ptr<SharedMemoryShard> shared;  // or through shared memory
};

enum class Transport {
  kLocal,
  kGrpc,                  // TCP only
  kGrpcOneChunkInFlight,  // TCP only
  kGrpcSharedMemory,      // values through shared memory, headers on TCP
};

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
      case Transport::kGrpcSharedMemory: {
        auto harness = std::make_unique<GrpcHarness>(options, 1 << 20);
        ASSERT_TRUE(harness->shared->WaitForSharedMemory(absl::Seconds(20)));
        harness_ = std::move(harness);
        break;
      }
      case Transport::kGrpcOneChunkInFlight:
        // Every other call queues in the client: exercises the budget.
        options.max_in_flight_bytes = kChunk * sizeof(float);
        options.connections = 3;
        harness_ = std::make_unique<GrpcHarness>(options);
        break;
    }
  }

  PsShard& shard() { return harness_->shard(); }

  void ConfigureServer(UpdateMode mode, int workers = 1, int replicas = 1) {
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
    spec = create.add_variables();
    spec->set_name("b");
    spec->add_shape(3);
    ASSERT_OK(shard().CreateVariables(create, Soon()));
  }

  // A batch over w's last chunk [8, 10) and all of b (one chunk of 3).
  template <typename Header>
  static void AddParts(Header* header) {
    auto* part = header->add_parts();
    part->set_variable("w");
    part->set_offset_elements(8);
    part->set_num_elements(2);
    part = header->add_parts();
    part->set_variable("b");
    part->set_offset_elements(0);
    part->set_num_elements(3);
  }

  absl::StatusOr<PullBatchResponse> PullBatch(std::vector<float>& w_tail,
                                              std::vector<float>& b,
                                              int64_t min_version = 0,
                                              absl::Time deadline = Soon()) {
    PullBatchRequest header;
    header.set_protocol_version(kProtocolVersion);
    header.set_min_version(min_version);
    AddParts(&header);
    Notification done;
    absl::StatusOr<PullBatchResponse> result;
    shard().PullBatch(header, {absl::MakeSpan(w_tail), absl::MakeSpan(b)},
                      deadline, [&](absl::StatusOr<PullBatchResponse> r) {
                        result = std::move(r);
                        done.Notify();
                      });
    done.WaitForNotification();
    return result;
  }

  absl::StatusOr<PushBatchResponse> PushBatch(std::vector<float> w_tail,
                                              std::vector<float> b,
                                              int64_t version = 0,
                                              int worker = 0) {
    PushBatchRequest header;
    header.set_protocol_version(kProtocolVersion);
    header.set_version(version);
    header.set_worker_index(worker);
    AddParts(&header);
    auto owner = std::make_shared<std::vector<std::vector<float>>>(
        std::vector<std::vector<float>>{std::move(w_tail), std::move(b)});
    Notification done;
    absl::StatusOr<PushBatchResponse> result;
    shard().PushBatch(header, {(*owner)[0], (*owner)[1]}, owner, Soon(),
                      [&](absl::StatusOr<PushBatchResponse> r) {
                        result = std::move(r);
                        done.Notify();
                      });
    done.WaitForNotification();
    return result;
  }

  // A pull of w's first chunk, [0, 4).
  static PullBatchRequest WChunkZeroPull() {
    PullBatchRequest pull;
    pull.set_protocol_version(kProtocolVersion);
    PullRequest* part = pull.add_parts();
    part->set_variable("w");
    part->set_offset_elements(0);
    part->set_num_elements(kChunk);
    return pull;
  }

  // A batch push of w's tail and b whose answer carries `then_pull`'s
  // values (by default the same parts) into `out`.
  absl::StatusOr<PushBatchResponse> PushThenPull(
      std::vector<float> w_tail, std::vector<float> b,
      std::vector<absl::Span<float>> out,
      std::optional<PullBatchRequest> then_pull = std::nullopt) {
    PushBatchRequest header;
    header.set_protocol_version(kProtocolVersion);
    AddParts(&header);
    if (then_pull.has_value()) {
      *header.mutable_then_pull() = *then_pull;
    } else {
      header.mutable_then_pull()->set_protocol_version(kProtocolVersion);
      AddParts(header.mutable_then_pull());
    }
    auto owner = std::make_shared<std::vector<std::vector<float>>>(
        std::vector<std::vector<float>>{std::move(w_tail), std::move(b)});
    Notification done;
    absl::StatusOr<PushBatchResponse> result;
    shard().PushThenPull(header, {(*owner)[0], (*owner)[1]}, owner,
                         std::move(out), Soon(),
                         [&](absl::StatusOr<PushBatchResponse> r) {
                           result = std::move(r);
                           done.Notify();
                         });
    done.WaitForNotification();
    return result;
  }
  absl::StatusOr<PullResponse> Pull(int64_t offset, std::vector<float>& out,
                                    int64_t min_version = 0,
                                    absl::Time deadline = Soon()) {
    return testing::PullOne(shard(), "w", offset, absl::MakeSpan(out),
                            min_version, deadline);
  }

  absl::StatusOr<PushResponse> Push(int64_t offset, std::vector<float> grad,
                                    int64_t version = 0, int worker = 0,
                                    const std::string& variable = "w",
                                    uint32_t protocol = kProtocolVersion) {
    testing::PushOptions options;
    options.version = version;
    options.worker = worker;
    options.protocol = protocol;
    return testing::PushOne(
        shard(), variable, offset,
        std::make_shared<const std::vector<float>>(std::move(grad)), Soon(),
        options);
  }

  absl::Status Assign(int64_t offset, std::vector<float> values) {
    AssignRequest header;
    header.set_protocol_version(kProtocolVersion);
    header.set_variable("w");
    header.set_offset_elements(offset);
    header.set_num_elements(values.size());
    auto owner = std::make_shared<std::vector<float>>(std::move(values));
    Notification done;
    absl::Status result;
    shard().Assign(header, *owner, owner, Soon(), [&](absl::Status s) {
      result = s;
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }

  // Embedding table "emb" (dimension 2, zero rows) and "lin" (1).
  void CreateTables() {
    CreateVariablesRequest create;
    create.set_protocol_version(kProtocolVersion);
    for (auto [name, dim] : {std::pair<const char*, int>{"emb", 2},
                             std::pair<const char*, int>{"lin", 1}}) {
      EmbeddingTableSpec* table = create.add_tables();
      table->set_name(name);
      table->set_dim(dim);
      table->mutable_initializer()->set_kind(RowInitializerConfig::ZEROS);
    }
    ASSERT_OK(shard().CreateVariables(create, Soon()));
  }

  // Pulls rows of "emb" (and, when given, "lin") in one request.
  absl::StatusOr<PullRowsResponse> PullRows(const std::vector<int64_t>& ids,
                                            std::vector<float>& emb,
                                            std::vector<float>* lin = nullptr,
                                            int64_t min_version = 0,
                                            absl::Time deadline = Soon()) {
    PullRowsRequest header;
    header.set_protocol_version(kProtocolVersion);
    header.set_train(true);
    header.set_min_version(min_version);
    std::vector<absl::Span<const int64_t>> id_parts = {ids};
    std::vector<absl::Span<float>> out = {absl::MakeSpan(emb)};
    RowsPart* part = header.add_parts();
    part->set_table("emb");
    part->set_num_ids(ids.size());
    if (lin != nullptr) {
      part = header.add_parts();
      part->set_table("lin");
      part->set_num_ids(ids.size());
      id_parts.push_back(ids);
      out.push_back(absl::MakeSpan(*lin));
    }
    Notification done;
    absl::StatusOr<PullRowsResponse> result;
    shard().PullRows(header, id_parts, out, deadline,
                     [&](absl::StatusOr<PullRowsResponse> r) {
                       result = std::move(r);
                       done.Notify();
                     });
    done.WaitForNotification();
    return result;
  }

  absl::StatusOr<PushRowsResponse> PushRows(const std::string& table,
                                            std::vector<int64_t> ids,
                                            std::vector<float> gradients,
                                            int64_t version = 0,
                                            int worker = 0) {
    PushRowsRequest header;
    header.set_protocol_version(kProtocolVersion);
    header.set_version(version);
    header.set_worker_index(worker);
    RowsPart* part = header.add_parts();
    part->set_table(table);
    part->set_num_ids(ids.size());
    auto owner =
        std::make_shared<std::pair<std::vector<int64_t>, std::vector<float>>>(
            std::move(ids), std::move(gradients));
    Notification done;
    absl::StatusOr<PushRowsResponse> result;
    shard().PushRows(header, {owner->first}, {owner->second}, owner, Soon(),
                     [&](absl::StatusOr<PushRowsResponse> r) {
                       result = std::move(r);
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
  ConfigureServer(ASYNC);
  ASSERT_OK(Assign(0, {1, 2, 3, 4}));
  ASSERT_OK(Assign(4, {5, 6, 7, 8}));
  ASSERT_OK(Assign(8, {9, 10}));
  EXPECT_THAT(ReadAll(), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9, 10));
}

TEST_P(PsShardConformanceTest, AsyncPushIsAppliedOnArrival) {
  ConfigureServer(ASYNC);
  ASSERT_OK_AND_ASSIGN(PushResponse response, Push(8, {1.5f, -2.0f}));
  EXPECT_EQ(response.version(), 1);
  EXPECT_THAT(ReadAll(), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, -1.5f, 2.0f));
}

TEST_P(PsShardConformanceTest, PullOfUnknownVariableIsNotFound) {
  ConfigureServer(ASYNC);
  EXPECT_THAT(Push(0, {1, 1, 1, 1}, 0, 0, "missing"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("variable \"missing\" is not on this")));
}

TEST_P(PsShardConformanceTest, MisalignedRangeIsInvalidArgument) {
  ConfigureServer(ASYNC);
  std::vector<float> out(3);
  EXPECT_THAT(Pull(1, out), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("is not one chunk")));
}

TEST_P(PsShardConformanceTest, NonFiniteGradientIsRejectedAndChangesNothing) {
  ConfigureServer(ASYNC);
  EXPECT_THAT(Push(4, {1, 2, std::numeric_limits<float>::quiet_NaN(), 4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("value nan at element 6")));
  EXPECT_THAT(ReadAll(), Each(0.0f));
  ASSERT_OK_AND_ASSIGN(StatsResponse stats, shard().Stats(Soon()));
  EXPECT_EQ(stats.nonfinite_gradients_rejected(), 1);
}

TEST_P(PsShardConformanceTest, OtherProtocolVersionIsRefused) {
  ConfigureServer(ASYNC);
  EXPECT_THAT(Push(0, {1, 1, 1, 1}, 0, 0, "w", kProtocolVersion + 1),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("run the same psflow release")));
}

TEST_P(PsShardConformanceTest, SyncPullWaitsForTheStepThenAnswers) {
  ConfigureServer(SYNC, 2, 2);
  ASSERT_OK(Push(0, {2, 2, 2, 2}, 0, 0));
  Notification pulled;
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
  ConfigureServer(SYNC, 1, 1);
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
  ConfigureServer(SYNC, 2, 2);
  std::vector<float> out(4);
  EXPECT_THAT(Pull(0, out, 1, absl::Now() + absl::Milliseconds(100)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_P(PsShardConformanceTest, StaleSyncGradientIsAborted) {
  ConfigureServer(SYNC, 2, 1);
  ASSERT_OK(Push(0, {1, 1, 1, 1}, 0, 0));
  EXPECT_THAT(Push(0, {1, 1, 1, 1}, 0, 1),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("stale")));
  ASSERT_OK_AND_ASSIGN(StatsResponse stats, shard().Stats(Soon()));
  EXPECT_EQ(stats.stale_gradients_dropped(), 1);
}

TEST_P(PsShardConformanceTest, ConcurrentPushesSumExactly) {
  ConfigureServer(ASYNC);
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
  ConfigureServer(ASYNC);
  ConfigureRequest other;
  other.set_protocol_version(kProtocolVersion);
  other.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  other.mutable_learning_rate()->set_learning_rate(0.1);
  other.set_mode(ASYNC);
  EXPECT_THAT(shard().Configure(other, Soon()),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_P(PsShardConformanceTest, ShutdownIsAcknowledged) {
  ConfigureServer(ASYNC);
  EXPECT_OK(shard().Shutdown("test over", Soon()));
}

TEST_P(PsShardConformanceTest, BatchPullReadsEveryPartInOrder) {
  ConfigureServer(ASYNC);
  ASSERT_OK(Assign(8, {9, 10}));
  ASSERT_OK(Push(0, {1, 1, 1, 1}));  // w chunk 0 at version 1, the rest 0
  std::vector<float> w_tail(2, -7), b(3, -7);
  ASSERT_OK_AND_ASSIGN(PullBatchResponse response, PullBatch(w_tail, b));
  EXPECT_THAT(response.versions(), ElementsAre(0, 0));
  EXPECT_THAT(w_tail, ElementsAre(9, 10));
  EXPECT_THAT(b, Each(0.0f));
}

TEST_P(PsShardConformanceTest, BatchPushAppliesEveryPart) {
  ConfigureServer(ASYNC);
  ASSERT_OK_AND_ASSIGN(PushBatchResponse response,
                       PushBatch({1, 2}, {3, 4, 5}));
  ASSERT_EQ(response.results_size(), 2);
  for (const PushPartResult& part : response.results()) {
    EXPECT_EQ(part.code(), 0);
    EXPECT_EQ(part.version(), 1);
  }
  std::vector<float> w_tail(2), b(3);
  ASSERT_OK(PullBatch(w_tail, b));
  EXPECT_THAT(w_tail, ElementsAre(-1, -2));
  EXPECT_THAT(b, ElementsAre(-3, -4, -5));
  ASSERT_OK_AND_ASSIGN(StatsResponse stats, shard().Stats(Soon()));
  EXPECT_EQ(stats.pushes(), 2);
  EXPECT_EQ(stats.updates_applied(), 2);
}

TEST_P(PsShardConformanceTest, PushThenPullAnswersWithTheValuesAfterThePush) {
  ConfigureServer(ASYNC);
  ASSERT_OK(Assign(8, {9, 10}));
  std::vector<float> w_tail(2, -7), b(3, -7);
  ASSERT_OK_AND_ASSIGN(
      PushBatchResponse response,
      PushThenPull({1, 2}, {3, 4, 5},
                   {absl::MakeSpan(w_tail), absl::MakeSpan(b)}));
  ASSERT_EQ(response.results_size(), 2);
  for (const PushPartResult& part : response.results()) {
    EXPECT_EQ(part.code(), 0);
    EXPECT_EQ(part.version(), 1);
  }
  EXPECT_THAT(response.pulled().versions(), ElementsAre(1, 1));
  EXPECT_THAT(w_tail, ElementsAre(8, 8));  // SGD, rate 1
  EXPECT_THAT(b, ElementsAre(-3, -4, -5));
  // Again: the second answer holds both pushes.
  ASSERT_OK_AND_ASSIGN(
      response, PushThenPull({1, 1}, {1, 1, 1},
                             {absl::MakeSpan(w_tail), absl::MakeSpan(b)}));
  EXPECT_THAT(response.pulled().versions(), ElementsAre(2, 2));
  EXPECT_THAT(w_tail, ElementsAre(7, 7));
  EXPECT_THAT(b, ElementsAre(-4, -5, -6));
}

TEST_P(PsShardConformanceTest, PushThenPullMayReadOtherParts) {
  ConfigureServer(ASYNC);
  ASSERT_OK(Assign(0, {1, 2, 3, 4}));
  const PullBatchRequest pull = WChunkZeroPull();
  std::vector<float> w_head(4, -7);
  ASSERT_OK_AND_ASSIGN(
      PushBatchResponse response,
      PushThenPull({1, 2}, {3, 4, 5}, {absl::MakeSpan(w_head)}, pull));
  EXPECT_THAT(response.pulled().versions(), ElementsAre(0));
  EXPECT_THAT(w_head, ElementsAre(1, 2, 3, 4));
}

TEST_P(PsShardConformanceTest, PushThenPullOfABadPushPullsNothing) {
  ConfigureServer(ASYNC);
  std::vector<float> w_tail(2, -7), b(3, -7);
  EXPECT_THAT(
      PushThenPull({1, 2}, {3, std::numeric_limits<float>::quiet_NaN(), 5},
                   {absl::MakeSpan(w_tail), absl::MakeSpan(b)}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not finite")));
  EXPECT_THAT(w_tail, Each(-7.0f));
  EXPECT_THAT(b, Each(-7.0f));
  ASSERT_OK_AND_ASSIGN(StatsResponse stats, shard().Stats(Soon()));
  EXPECT_EQ(stats.updates_applied(), 0);
}

TEST_P(PsShardConformanceTest, PushThenPullOfAStaleSyncPartPullsNothing) {
  ConfigureServer(SYNC);
  ASSERT_OK(Push(0, {1, 1, 1, 1}));  // w chunk 0 moves to step 1
  const PullBatchRequest pull = WChunkZeroPull();
  PushBatchRequest header;
  header.set_protocol_version(kProtocolVersion);
  header.set_version(0);  // stale: the chunk is at step 1
  PushRequest* push = header.add_parts();
  push->set_variable("w");
  push->set_offset_elements(0);
  push->set_num_elements(4);
  *header.mutable_then_pull() = pull;
  auto owner = std::make_shared<std::vector<float>>(4, 1.0f);
  std::vector<float> w_head(4, -7);
  Notification done;
  absl::StatusOr<PushBatchResponse> result;
  shard().PushThenPull(header, {*owner}, owner, {absl::MakeSpan(w_head)},
                       Soon(), [&](absl::StatusOr<PushBatchResponse> r) {
                         result = std::move(r);
                         done.Notify();
                       });
  done.WaitForNotification();
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(w_head, Each(-7.0f));
}

TEST_P(PsShardConformanceTest, BatchWithANonFinitePartChangesNothing) {
  ConfigureServer(ASYNC);
  EXPECT_THAT(PushBatch({1, 2}, {3, std::numeric_limits<float>::infinity(), 5}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("push to \"b\" from worker 0: gradient "
                                 "value inf at element 1 is not finite")));
  std::vector<float> w_tail(2, -7), b(3, -7);
  ASSERT_OK(PullBatch(w_tail, b));
  EXPECT_THAT(w_tail, Each(0.0f));  // The good part was not applied either.
  EXPECT_THAT(b, Each(0.0f));
  ASSERT_OK_AND_ASSIGN(StatsResponse stats, shard().Stats(Soon()));
  EXPECT_EQ(stats.nonfinite_gradients_rejected(), 1);
  EXPECT_EQ(stats.updates_applied(), 0);
}

TEST_P(PsShardConformanceTest, BatchWithAnUnknownPartIsNotFound) {
  ConfigureServer(ASYNC);
  PullBatchRequest header;
  header.set_protocol_version(kProtocolVersion);
  AddParts(&header);
  header.mutable_parts(1)->set_variable("missing");
  std::vector<float> w_tail(2), b(3);
  Notification done;
  absl::StatusOr<PullBatchResponse> result;
  shard().PullBatch(header, {absl::MakeSpan(w_tail), absl::MakeSpan(b)}, Soon(),
                    [&](absl::StatusOr<PullBatchResponse> r) {
                      result = std::move(r);
                      done.Notify();
                    });
  done.WaitForNotification();
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kNotFound,
                               HasSubstr("variable \"missing\"")));
}

TEST_P(PsShardConformanceTest, EmptyBatchIsInvalidArgument) {
  ConfigureServer(ASYNC);
  PushBatchRequest header;
  header.set_protocol_version(kProtocolVersion);
  Notification done;
  absl::StatusOr<PushBatchResponse> result;
  shard().PushBatch(header, {}, nullptr, Soon(),
                    [&](absl::StatusOr<PushBatchResponse> r) {
                      result = std::move(r);
                      done.Notify();
                    });
  done.WaitForNotification();
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("1 to 256 parts")));
}

// The answer waits for the slowest part: here b completes step 1 only
// after w's tail does.
TEST_P(PsShardConformanceTest, SyncBatchPullWaitsForEveryPart) {
  ConfigureServer(SYNC, 1, 1);
  Notification pulled;
  std::vector<float> w_tail(2), b(3);
  absl::StatusOr<PullBatchResponse> result;
  std::thread puller([&] {
    result = PullBatch(w_tail, b, /*min_version=*/1);
    pulled.Notify();
  });
  ASSERT_OK(Push(8, {1, 1}));
  EXPECT_FALSE(pulled.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  ASSERT_OK_AND_ASSIGN(PushResponse pushed, Push(0, {2, 2, 2}, 0, 0, "b"));
  EXPECT_EQ(pushed.version(), 1);
  puller.join();
  ASSERT_OK(result);
  EXPECT_THAT(result->versions(), ElementsAre(1, 1));
  EXPECT_THAT(w_tail, Each(-1.0f));
  EXPECT_THAT(b, Each(-2.0f));
}

TEST_P(PsShardConformanceTest, SyncBatchPullGivesUpAtItsDeadline) {
  ConfigureServer(SYNC, 1, 1);
  ASSERT_OK(Push(8, {1, 1}));  // w's tail reaches step 1, b never does
  std::vector<float> w_tail(2), b(3);
  EXPECT_THAT(PullBatch(w_tail, b, 1, absl::Now() + absl::Milliseconds(100)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_P(PsShardConformanceTest, StalePartOfASyncBatchIsAbortedAlone) {
  ConfigureServer(SYNC, 2, 1);
  ASSERT_OK(Push(8, {1, 1}, 0, 0));  // w's tail moves to step 1
  ASSERT_OK_AND_ASSIGN(PushBatchResponse response,
                       PushBatch({5, 5}, {1, 1, 1}, /*version=*/0, 1));
  ASSERT_EQ(response.results_size(), 2);
  EXPECT_EQ(response.results(0).code(),
            static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_THAT(response.results(0).message(), HasSubstr("stale"));
  EXPECT_EQ(response.results(1).code(), 0);
  EXPECT_EQ(response.results(1).version(), 1);
  std::vector<float> w_tail(2), b(3);
  ASSERT_OK(PullBatch(w_tail, b));
  EXPECT_THAT(w_tail, Each(-1.0f));
  EXPECT_THAT(b, Each(-1.0f));
}

TEST_P(PsShardConformanceTest, RowsArePushedAndPulledBack) {
  ConfigureServer(ASYNC);
  CreateTables();
  ASSERT_OK(PushRows("emb", {7, -3}, {1, 2, 3, 4}));
  ASSERT_OK(PushRows("lin", {7}, {5}));
  std::vector<float> emb(6), lin(3);
  ASSERT_OK_AND_ASSIGN(PullRowsResponse response,
                       PullRows({7, 1LL << 60, -3}, emb, &lin));
  EXPECT_THAT(response.versions(), ElementsAre(1, 1));
  EXPECT_THAT(emb, ElementsAre(-1, -2, 0, 0, -3, -4));
  EXPECT_THAT(lin, ElementsAre(-5, 0, 0));
  ASSERT_OK_AND_ASSIGN(StatsResponse stats, shard().Stats(Soon()));
  ASSERT_EQ(stats.tables_size(), 2);
  EXPECT_EQ(stats.tables(0).name(), "emb");
  EXPECT_EQ(stats.tables(0).rows(), 3);
  EXPECT_EQ(stats.tables(1).rows(), 3);
}

TEST_P(PsShardConformanceTest, RowsOfAnUnknownTableAreNotFound) {
  ConfigureServer(ASYNC);
  CreateTables();
  EXPECT_THAT(PushRows("nope", {1}, {1}),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no embedding table 'nope'")));
}

TEST_P(PsShardConformanceTest, RowsWithTheWrongGradientSizeAreRefused) {
  ConfigureServer(ASYNC);
  CreateTables();
  // Two ids of dimension 2 need 4 floats.
  EXPECT_THAT(PushRows("emb", {1, 2}, {1, 2, 3}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(PsShardConformanceTest, NonFiniteRowGradientChangesNothing) {
  ConfigureServer(ASYNC);
  CreateTables();
  EXPECT_THAT(PushRows("emb", {1, 2}, {1, 1, 1, std::nanf("")}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("of id 2 is not finite")));
  std::vector<float> emb(4);
  ASSERT_OK(PullRows({1, 2}, emb));
  EXPECT_THAT(emb, Each(0.0f));
}

TEST_P(PsShardConformanceTest, SyncRowsPullWaitsForTheStep) {
  ConfigureServer(SYNC, 2, 2);
  CreateTables();
  ASSERT_OK(PushRows("emb", {4}, {2, 2}, 0, 0));
  Notification pulled;
  std::vector<float> emb(2);
  absl::StatusOr<PullRowsResponse> result;
  std::thread puller([&] {
    result = PullRows({4}, emb, nullptr, /*min_version=*/1);
    pulled.Notify();
  });
  EXPECT_FALSE(pulled.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  ASSERT_OK(PushRows("emb", {4}, {4, 4}, 0, 1));
  puller.join();
  ASSERT_OK(result);
  EXPECT_THAT(result->versions(), ElementsAre(1));
  EXPECT_THAT(emb, Each(-3.0f));
  // The push from step 0 is stale now: Aborted in its part's result.
  ASSERT_OK_AND_ASSIGN(PushRowsResponse stale, PushRows("emb", {4}, {1, 1}));
  EXPECT_EQ(stale.results(0).code(),
            static_cast<int>(absl::StatusCode::kAborted));
}

TEST_P(PsShardConformanceTest, SyncRowsPullGivesUpAtItsDeadline) {
  ConfigureServer(SYNC, 2, 2);
  CreateTables();
  std::vector<float> emb(2);
  EXPECT_THAT(
      PullRows({4}, emb, nullptr, 1, absl::Now() + absl::Milliseconds(100)),
      StatusIs(absl::StatusCode::kDeadlineExceeded));
}

INSTANTIATE_TEST_SUITE_P(Transports, PsShardConformanceTest,
                         ::testing::Values(Transport::kLocal, Transport::kGrpc,
                                           Transport::kGrpcOneChunkInFlight,
                                           Transport::kGrpcSharedMemory),
                         [](const auto& info) {
                           switch (info.param) {
                             case Transport::kLocal:
                               return std::string("InProcess");
                             case Transport::kGrpc:
                               return std::string("Grpc");
                             case Transport::kGrpcOneChunkInFlight:
                               return std::string("GrpcOneChunkInFlight");
                             case Transport::kGrpcSharedMemory:
                               return std::string("GrpcSharedMemory");
                           }
                           return std::string("Unknown");
                         });

}  // namespace
}  // namespace psflow
