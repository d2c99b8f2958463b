#include "client/ps_client.h"

#include <atomic>
#include <numeric>
#include <thread>

#include "client/local_ps_shard.h"
#include "common/mutex.h"
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

TEST_F(ParameterClientTest, PushThenPullReadsEveryPartAfterItsPush) {
  Start(SgdConfig(ASYNC));
  std::iota(emb_.begin(), emb_.end(), 0.0f);
  bias_ = {100, 101, 102, 103, 104};
  ASSERT_OK(client_->Assign({{"emb", emb_}, {"bias", bias_}})->Wait());
  std::vector<float> emb_grad(30, 1.0f), bias_grad = {1, 2, 3, 4, 5};
  std::vector<float> emb(30, -7), bias(5, -7);
  auto call = client_->PushThenPull(
      {{"emb", emb_grad}, {"bias", bias_grad}},
      {{"emb", absl::MakeSpan(emb)}, {"bias", absl::MakeSpan(bias)}});
  ASSERT_OK(call->Wait());
  for (int i = 0; i < 30; ++i) EXPECT_EQ(emb[i], i - 1.0f) << i;
  EXPECT_THAT(bias, ElementsAre(99, 99, 99, 99, 99));
  EXPECT_EQ(call->min_version(), 1);  // every chunk after its one push
  int64_t updates = 0;
  for (const auto& core : cores_) updates += core->Stats().updates_applied();
  EXPECT_EQ(updates, 9 + 2);  // emb's 9 chunks, bias's 2
}

TEST_F(ParameterClientTest, PushThenPullNeedsAGradientPerValue) {
  Start(SgdConfig(ASYNC));
  std::vector<float> emb_grad(30), emb(30), bias(5);
  EXPECT_THAT(
      client_
          ->PushThenPull({{"emb", emb_grad}}, {{"emb", absl::MakeSpan(emb)},
                                               {"bias", absl::MakeSpan(bias)}})
          ->Wait(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("1 gradients for 2 variables")));
  EXPECT_THAT(client_
                  ->PushThenPull({{"bias", absl::MakeConstSpan(bias)}},
                                 {{"emb", absl::MakeSpan(emb)}})
                  ->Wait(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sends \"bias\" (5 elements) where it reads "
                                 "\"emb\" (30)")));
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

// Heap memory standing for a piece of a shared region.
class HeapSharedBuffer final : public SharedBuffer {
 public:
  explicit HeapSharedBuffer(int64_t elements) : values_(elements) {}
  absl::Span<float> span() override { return absl::MakeSpan(values_); }
  bool retired() const override { return false; }

 private:
  std::vector<float> values_;
};

// Forwards to an in-process shard, counting the bulk calls by kind.
class CountingShard final : public PsShard {
 public:
  explicit CountingShard(ParameterServerCore* core) : inner_(core, "ps-0") {}

  // With `share`, hands out memory as a server on this host would.
  std::shared_ptr<SharedBuffer> AllocateShared(int64_t elements) override {
    if (!share) return nullptr;
    shared_runs.push_back(elements);
    return std::make_shared<HeapSharedBuffer>(elements);
  }
  bool share = false;
  std::vector<int64_t> shared_runs;  // elements of each AllocateShared

  const std::string& name() const override { return inner_.name(); }
  absl::StatusOr<ConfigureResponse> Configure(const ConfigureRequest& r,
                                              absl::Time d) override {
    return inner_.Configure(r, d);
  }
  absl::Status CreateVariables(const CreateVariablesRequest& r,
                               absl::Time d) override {
    created.push_back(r);
    return inner_.CreateVariables(r, d);
  }
  absl::StatusOr<StatsResponse> Stats(absl::Time d) override {
    return inner_.Stats(d);
  }
  absl::Status Shutdown(const std::string& r, absl::Time d) override {
    if (on_shutdown) RETURN_IF_ERROR(on_shutdown(d));
    return inner_.Shutdown(r, d);
  }
  absl::Status ExcludeWorkers(const ExcludeWorkersRequest& r,
                              absl::Time d) override {
    return inner_.ExcludeWorkers(r, d);
  }
  absl::StatusOr<HoldResponse> Hold(const HoldRequest& r,
                                    absl::Time d) override {
    return inner_.Hold(r, d);
  }
  absl::StatusOr<SaveShardResponse> SaveShard(const SaveShardRequest& r,
                                              absl::Time d) override {
    return inner_.SaveShard(r, d);
  }
  absl::StatusOr<RestoreShardResponse> RestoreShard(
      const RestoreShardRequest& r, absl::Time d) override {
    return inner_.RestoreShard(r, d);
  }
  void PullBatch(
      const PullBatchRequest& h, std::vector<absl::Span<float>> out,
      absl::Time d,
      std::function<void(absl::StatusOr<PullBatchResponse>)> done) override {
    batch_parts.push_back(h.parts_size());
    if (defer_pulls) {
      // Completed later, from another thread, as a remote server would.
      MutexLock lock(&mu_);
      deferred_.push_back(
          [this, h, out = std::move(out), d, done = std::move(done)]() mutable {
            inner_.PullBatch(h, std::move(out), d, std::move(done));
          });
      pull_deferred.Notify();
      return;
    }
    inner_.PullBatch(h, std::move(out), d, std::move(done));
  }
  // Completes every deferred pull (any thread).
  void CompleteDeferredPulls() {
    std::vector<std::function<void()>> calls;
    {
      MutexLock lock(&mu_);
      calls.swap(deferred_);
    }
    for (auto& call : calls) call();
  }
  void PushBatch(
      const PushBatchRequest& h, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, absl::Time d,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override {
    batch_parts.push_back(h.parts_size());
    inner_.PushBatch(h, std::move(data), std::move(owner), d, std::move(done));
  }
  void Assign(const AssignRequest& h, absl::Span<const float> data,
              std::shared_ptr<const void> owner, absl::Time d,
              std::function<void(absl::Status)> done) override {
    inner_.Assign(h, data, std::move(owner), d, std::move(done));
  }
  void PullRows(
      const PullRowsRequest& h, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<float>> out, absl::Time d,
      std::function<void(absl::StatusOr<PullRowsResponse>)> done) override {
    rows_parts.push_back(h.parts_size());
    if (defer_pulls) {
      MutexLock lock(&mu_);
      deferred_.push_back([this, h, ids = std::move(ids), out = std::move(out),
                           d, done = std::move(done)]() mutable {
        inner_.PullRows(h, std::move(ids), std::move(out), d, std::move(done));
      });
      pull_deferred.Notify();
      return;
    }
    inner_.PullRows(h, std::move(ids), std::move(out), d, std::move(done));
  }
  void PushRows(
      const PushRowsRequest& h, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<const float>> gradients,
      std::shared_ptr<const void> owner, absl::Time d,
      std::function<void(absl::StatusOr<PushRowsResponse>)> done) override {
    rows_parts.push_back(h.parts_size());
    inner_.PushRows(h, std::move(ids), std::move(gradients), std::move(owner),
                    d, std::move(done));
  }

  // Calls come from the test's thread only.
  std::vector<int> batch_parts;
  std::vector<int> rows_parts;  // parts of each rows call
  std::vector<CreateVariablesRequest> created;
  // Runs first in Shutdown when set.
  std::function<absl::Status(absl::Time deadline)>
      on_shutdown;  // parts of each batch call, in order
  // Set before the first pull: pulls wait for CompleteDeferredPulls().
  bool defer_pulls = false;
  Notification pull_deferred;

 private:
  LocalPsShard inner_;
  Mutex mu_;
  std::vector<std::function<void()>> deferred_ ABSL_GUARDED_BY(mu_);
};

// One in-process server behind a CountingShard, configured for SGD, with
// `variables` created on it.
class ParameterClientBatchingTest : public ::testing::Test {
 protected:
  void Start(int64_t chunk_elements,
             const std::vector<LogicalVariable>& variables) {
    core_ = std::make_unique<ParameterServerCore>(ParameterServerCore::Options{
        static_cast<int64_t>(chunk_elements * sizeof(float))});
    auto shard = std::make_unique<CountingShard>(core_.get());
    shard_ = shard.get();
    std::vector<std::unique_ptr<PsShard>> shards;
    shards.push_back(std::move(shard));
    absl::StatusOr<Placement> placement =
        PlaceVariables(variables, 1, /*split_threshold_bytes=*/1 << 20);
    ASSERT_OK(placement);
    client_ = std::make_unique<ParameterClient>(std::move(shards), *placement,
                                                ParameterClient::Options());
    ASSERT_OK(client_->Configure(SgdConfig(ASYNC)));
    ASSERT_OK(client_->CreateVariables());
  }

  std::unique_ptr<ParameterServerCore> core_;  // outlives the client
  std::unique_ptr<ParameterClient> client_;
  CountingShard* shard_ = nullptr;  // owned by client_
};

// One server, 4-element chunks: "big" is two full chunks and travels as two
// one-part batches; "a" (3), "b" (2) and "c" (1) are packed into batches of
// at most a chunk's worth: a alone (a + b would exceed 4), then b and c
// together.
TEST_F(ParameterClientBatchingTest, SmallVariablesShareRpcsUpToAChunk) {
  ASSERT_NO_FATAL_FAILURE(
      Start(4, {{"big", {8}}, {"a", {3}}, {"b", {2}}, {"c", {1}}}));
  ParameterClient& client = *client_;
  CountingShard* shard = shard_;

  std::vector<float> big(8), a(3), b(2), c(1);
  std::iota(big.begin(), big.end(), 1.0f);
  std::iota(a.begin(), a.end(), 10.0f);
  std::iota(b.begin(), b.end(), 20.0f);
  c = {30};
  ASSERT_OK(client.Push({{"big", big}, {"a", a}, {"b", b}, {"c", c}})->Wait());
  // big's two chunks, a, then b and c.
  EXPECT_THAT(shard->batch_parts, ElementsAre(1, 1, 1, 2));

  std::vector<float> big_out(8), a_out(3), b_out(2), c_out(1);
  auto pull = client.Pull({{"big", absl::MakeSpan(big_out)},
                           {"a", absl::MakeSpan(a_out)},
                           {"b", absl::MakeSpan(b_out)},
                           {"c", absl::MakeSpan(c_out)}});
  ASSERT_OK(pull->Wait());
  EXPECT_EQ(pull->min_version(), 1);
  EXPECT_THAT(shard->batch_parts, ElementsAre(1, 1, 1, 2, 1, 1, 1, 2));
  EXPECT_THAT(big_out, ElementsAre(-1, -2, -3, -4, -5, -6, -7, -8));
  EXPECT_THAT(a_out, ElementsAre(-10, -11, -12));
  EXPECT_THAT(b_out, ElementsAre(-20, -21));
  EXPECT_THAT(c_out, ElementsAre(-30));
}

// Each server gives one run for the variables placed on it, in the
// caller's order, so a batch of small variables is one contiguous run.
TEST_F(ParameterClientBatchingTest, SharedMemoryIsOneRunPerServerInOrder) {
  ASSERT_NO_FATAL_FAILURE(
      Start(4, {{"big", {8}}, {"a", {3}}, {"b", {2}}, {"c", {1}}}));
  EXPECT_THAT(client_->AllocateShared({"big", "a"}), Each(nullptr))
      << "a server without shared memory gives none";
  shard_->share = true;
  std::vector<std::shared_ptr<SharedBuffer>> buffers =
      client_->AllocateShared({"big", "a", "b", "c", "unknown"});
  EXPECT_THAT(shard_->shared_runs, ElementsAre(14));
  ASSERT_EQ(buffers.size(), 5);
  EXPECT_EQ(buffers[4], nullptr) << "not a variable of the placement";
  const std::vector<int64_t> sizes = {8, 3, 2, 1};
  for (int i = 0; i < 4; ++i) {
    ASSERT_NE(buffers[i], nullptr);
    EXPECT_EQ(buffers[i]->span().size(), sizes[i]);
    if (i > 0) {
      EXPECT_EQ(buffers[i]->span().data(),
                buffers[i - 1]->span().data() + sizes[i - 1]);
    }
  }
  // They serve as any buffers do.
  std::iota(buffers[1]->span().begin(), buffers[1]->span().end(), 1.0f);
  ASSERT_OK(client_->Push({{"a", buffers[1]->span()}})->Wait());
  ASSERT_OK(client_->Pull({{"a", buffers[1]->span()}})->Wait());
  EXPECT_THAT(buffers[1]->span(), ElementsAre(-1, -2, -3));
}

// A variable split over servers cannot be one run in one server's memory.
TEST(ParameterClientSharedMemoryTest, ASplitVariableGetsNone) {
  std::vector<std::unique_ptr<ParameterServerCore>> cores;
  std::vector<std::unique_ptr<PsShard>> shards;
  std::vector<CountingShard*> counting;
  for (int i = 0; i < kNumPs; ++i) {
    cores.push_back(std::make_unique<ParameterServerCore>(
        ParameterServerCore::Options{4 * sizeof(float)}));
    auto shard = std::make_unique<CountingShard>(cores.back().get());
    shard->share = true;
    counting.push_back(shard.get());
    shards.push_back(std::move(shard));
  }
  ASSERT_OK_AND_ASSIGN(
      Placement placement,
      PlaceVariables({{"emb", {10, 3}}, {"bias", {5}}, {"scale", {}}}, kNumPs,
                     /*split_threshold_bytes=*/64));
  ParameterClient client(std::move(shards), placement,
                         ParameterClient::Options());
  std::vector<std::shared_ptr<SharedBuffer>> buffers =
      client.AllocateShared({"emb", "bias", "scale"});
  ASSERT_EQ(buffers.size(), 3);
  EXPECT_EQ(buffers[0], nullptr);
  ASSERT_NE(buffers[1], nullptr);
  ASSERT_NE(buffers[2], nullptr);
  EXPECT_EQ(buffers[1]->span().size(), 5);
  EXPECT_EQ(buffers[2]->span().size(), 1);
  int64_t runs = 0;
  for (CountingShard* shard : counting) {
    for (int64_t elements : shard->shared_runs) runs += elements;
  }
  EXPECT_EQ(runs, 6) << "emb takes no shared memory";
}

// Long variable names fill a batch's header before its chunk: with
// 1000-character names (servers accept up to 1024), 31 parts fit in
// kMaxBatchHeaderBytes, so 40 one-element variables go as 31 + 9.
// A caller that drops a handle without Wait() (an early return on an
// error path) must not leave a call writing into its buffer afterwards:
// dropping the handle waits. A diverging job's workers once died of heap
// corruption this way (a prefetching pull landed in a freed buffer).
TEST_F(ParameterClientBatchingTest, DroppingAHandleWaitsForItsCalls) {
  ASSERT_NO_FATAL_FAILURE(Start(4, {{"w", {4}}}));
  ASSERT_OK(client_->Push({{"w", std::vector<float>{1, 2, 3, 4}}})->Wait());
  shard_->defer_pulls = true;
  auto buffer = std::make_unique<std::vector<float>>(4);
  std::shared_ptr<PsHandle> pull =
      client_->Pull({{"w", absl::MakeSpan(*buffer)}});

  Notification dropped;
  std::atomic<bool> completed{false};
  std::thread server([&] {
    shard_->pull_deferred.WaitForNotification();
    // A drop that does not wait notifies at once; one that waits cannot
    // until this thread completes the pull, after the timeout.
    dropped.WaitForNotificationWithTimeout(absl::Milliseconds(100));
    completed = true;
    shard_->CompleteDeferredPulls();
  });
  pull.reset();
  const bool completed_before_drop_returned = completed;
  dropped.Notify();
  server.join();
  EXPECT_TRUE(completed_before_drop_returned);
  EXPECT_THAT(*buffer, ElementsAre(-1, -2, -3, -4));
}

// The same for a rows pull; and since its rows reach the caller only in
// Wait(), a dropped one leaves the caller's buffer as it was.
TEST_F(ParameterClientBatchingTest, DroppingARowsHandleWaitsAndWritesNothing) {
  ASSERT_NO_FATAL_FAILURE(Start(4, {{"w", {4}}}));
  EmbeddingTableSpec table;
  table.set_name("emb");
  table.set_dim(2);
  table.mutable_initializer()->set_kind(RowInitializerConfig::ZEROS);
  ASSERT_OK(client_->CreateTables({table}));
  shard_->defer_pulls = true;
  const std::vector<int64_t> ids = {3, 4};
  auto buffer = std::make_unique<std::vector<float>>(4, -99.0f);
  std::shared_ptr<RowsHandle> pull = client_->StartPullRows(
      {{"emb", 2, ids, absl::MakeSpan(*buffer), {}}}, /*train=*/true);

  Notification dropped;
  std::atomic<bool> completed{false};
  std::thread server([&] {
    shard_->pull_deferred.WaitForNotification();
    dropped.WaitForNotificationWithTimeout(absl::Milliseconds(100));
    completed = true;
    shard_->CompleteDeferredPulls();
  });
  pull.reset();
  const bool completed_before_drop_returned = completed;
  dropped.Notify();
  server.join();
  EXPECT_TRUE(completed_before_drop_returned);
  EXPECT_THAT(*buffer, ElementsAre(-99, -99, -99, -99));
}

TEST_F(ParameterClientBatchingTest, LongNamesSplitBatchesToBoundTheHeader) {
  std::vector<LogicalVariable> variables;
  for (int i = 0; i < 40; ++i) {
    variables.push_back({absl::StrCat(i, std::string(1000 - 2, 'x')), {1}});
  }
  ASSERT_NO_FATAL_FAILURE(Start(64, variables));
  ParameterClient& client = *client_;
  CountingShard* shard = shard_;
  std::vector<float> gradient(40);
  std::iota(gradient.begin(), gradient.end(), 1.0f);
  std::vector<ParameterClient::Const> gradients;
  for (int i = 0; i < 40; ++i) {
    gradients.emplace_back(variables[i].name,
                           absl::MakeConstSpan(&gradient[i], 1));
  }
  ASSERT_OK(client.Push(gradients)->Wait());
  EXPECT_THAT(shard->batch_parts, ElementsAre(31, 9));
  std::vector<float> values(40);
  std::vector<ParameterClient::Mutable> targets;
  for (int i = 0; i < 40; ++i) {
    targets.emplace_back(variables[i].name, absl::MakeSpan(&values[i], 1));
  }
  ASSERT_OK(client.Pull(targets)->Wait());
  for (int i = 0; i < 40; ++i) EXPECT_EQ(values[i], -(i + 1.0f)) << i;
}

TEST_F(ParameterClientBatchingTest, CreateVariablesSendsEachUpdateRule) {
  LogicalVariable mean{"bn/moving_mean", {3}};
  mean.update = VariableUpdate::kMovingAverage;
  mean.momentum = 0.9f;
  ASSERT_NO_FATAL_FAILURE(Start(4, {{"w", {2}}, mean}));
  ASSERT_EQ(shard_->created.size(), 1u);
  const CreateVariablesRequest& sent = shard_->created[0];
  ASSERT_EQ(sent.variables_size(), 2);
  EXPECT_EQ(sent.variables(0).name(), "w");
  EXPECT_EQ(sent.variables(0).update(), VariableSpec::OPTIMIZER);
  EXPECT_EQ(sent.variables(0).momentum(), 0.0f);
  EXPECT_EQ(sent.variables(1).name(), "bn/moving_mean");
  EXPECT_EQ(sent.variables(1).update(), VariableSpec::MOVING_AVERAGE);
  EXPECT_EQ(sent.variables(1).momentum(), 0.9f);
}

// "mean" (6 x 2) is split over three servers: pushes to it average on every
// server, while SGD (lr 1) moves "w" beside it.
TEST(ParameterClientMovingAverageTest, EveryPartOfASplitAverageAverages) {
  std::vector<std::unique_ptr<ParameterServerCore>> cores;
  std::vector<std::unique_ptr<PsShard>> shards;
  for (int i = 0; i < kNumPs; ++i) {
    cores.push_back(std::make_unique<ParameterServerCore>(
        ParameterServerCore::Options{4 * sizeof(float)}));
    shards.push_back(std::make_unique<LocalPsShard>(cores.back().get(),
                                                    absl::StrCat("ps-", i)));
  }
  LogicalVariable mean{"mean", {6, 2}};
  mean.update = VariableUpdate::kMovingAverage;
  mean.momentum = 0.5f;
  ASSERT_OK_AND_ASSIGN(Placement placement,
                       PlaceVariables({mean, {"w", {2}}}, kNumPs,
                                      /*split_threshold_bytes=*/16));
  ASSERT_EQ(placement.Find("mean")->parts.size(), 3u);
  ParameterClient client(std::move(shards), placement,
                         ParameterClient::Options());
  ASSERT_OK(client.Configure(SgdConfig(ASYNC)));
  ASSERT_OK(client.CreateVariables());
  const std::vector<float> x(12, 4.0f), g(2, 1.0f);
  std::vector<float> mean_out(12), w_out(2);
  for (float expected : {2.0f, 3.0f}) {  // 0.5 * v + 0.5 * 4
    ASSERT_OK(client.Push({{"mean", x}, {"w", g}})->Wait());
    ASSERT_OK(client
                  .Pull({{"mean", absl::MakeSpan(mean_out)},
                         {"w", absl::MakeSpan(w_out)}})
                  ->Wait());
    EXPECT_THAT(mean_out, Each(expected));
  }
  EXPECT_THAT(w_out, Each(-2.0f));
}

// Each server's Shutdown waits until the other's has started: a client that
// stopped servers one after another would wait out the first one's
// deadline and fail.
TEST(ParameterClientShutdownTest, StopsEveryServerAtOnce) {
  ParameterServerCore core_a(ParameterServerCore::Options{});
  ParameterServerCore core_b(ParameterServerCore::Options{});
  auto a = std::make_unique<CountingShard>(&core_a);
  auto b = std::make_unique<CountingShard>(&core_b);
  Mutex mu;
  int entered = 0;
  auto meet = [&](absl::Time deadline) -> absl::Status {
    MutexLock lock(&mu);
    ++entered;
    auto both = [&entered]() { return entered == 2; };
    if (!mu.AwaitWithDeadline(Condition(&both), deadline)) {
      return absl::DeadlineExceededError("the other server was not asked");
    }
    return absl::OkStatus();
  };
  a->on_shutdown = meet;
  b->on_shutdown = meet;
  std::vector<std::unique_ptr<PsShard>> shards;
  shards.push_back(std::move(a));
  shards.push_back(std::move(b));
  ParameterClient client(std::move(shards), Placement(),
                         ParameterClient::Options());
  EXPECT_OK(client.ShutdownAll("done", absl::Seconds(30)));
}

TEST(ParameterClientShutdownTest, ReportsAServerThatDidNotStop) {
  ParameterServerCore core_a(ParameterServerCore::Options{});
  ParameterServerCore core_b(ParameterServerCore::Options{});
  auto a = std::make_unique<CountingShard>(&core_a);
  auto b = std::make_unique<CountingShard>(&core_b);
  b->on_shutdown = [](absl::Time) {
    return absl::UnavailableError("ps-1 at 10.0.0.2:2222 is unreachable");
  };
  std::vector<std::unique_ptr<PsShard>> shards;
  shards.push_back(std::move(a));
  shards.push_back(std::move(b));
  ParameterClient client(std::move(shards), Placement(),
                         ParameterClient::Options());
  EXPECT_THAT(client.ShutdownAll("done"),
              StatusIs(absl::StatusCode::kUnavailable,
                       ::testing::HasSubstr("ps-1 at 10.0.0.2:2222")));
}

}  // namespace
}  // namespace psflow
