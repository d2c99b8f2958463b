// SYNC's overlap (worker/sync_groups.h) keeps the mode's guarantee: one
// gradient per worker per variable per step. Pushes leave in backward's
// order and pulls in forward's, one group per variable here.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chief/local_coordinator_client.h"
#include "client/local_ps_shard.h"
#include "common/mutex.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "tests/in_process_job.h"
#include "worker/trainer.h"

namespace psflow {
namespace {

using ::psflow::testing::InProcessJob;

// A 4-3-2 MLP (variables: hidden kernel and bias, output kernel and bias)
// in SYNC for `workers` workers, every one's gradient aggregated.
JobSpec MlpSyncSpec(int workers, int64_t total_steps) {
  JobSpec spec = testing::SoftmaxRegressionSpec(SYNC, total_steps, 0.1);
  ModelConfig& model = *spec.mutable_config()->mutable_model();
  model.Clear();
  model.mutable_mlp()->add_hidden_sizes(3);
  spec.set_num_workers(workers);
  spec.mutable_ps_config()->set_num_workers(workers);
  spec.mutable_ps_config()->set_replicas_to_aggregate(workers);
  spec.mutable_config()->mutable_training()->set_batch_size(8);
  spec.mutable_config()->mutable_logging()->set_log_every_steps(1000);
  return spec;
}

std::shared_ptr<Dataset> Examples() {
  auto data = std::make_shared<Dataset>();
  data->num_examples = 64;
  data->example_shape = {4};
  data->num_features = 4;
  data->num_classes = 2;
  for (int i = 0; i < data->num_examples; ++i) {
    data->labels.push_back(i % 2);
    for (int f = 0; f < 4; ++f) {
      data->features.push_back(static_cast<uint8_t>((i * 37 + f * 11) % 256));
    }
  }
  return data;
}

// One worker's own model, data and chief connection.
struct Worker {
  Worker(InProcessJob& job, const JobSpec& spec, int index,
         ParameterClient* client) {
    device = CreateCpuDevice(1);
    model = *job.definition->Instantiate(device.get(), 8);
    BatchStream::Options stream;
    stream.batch_size = 8;
    stream.seed = 3 + index;
    batches = std::make_unique<BatchStream>(Examples(), stream);
    chief = std::make_unique<LocalCoordinatorClient>(
        job.coordinator.get(), TaskId{TaskType::kWorker, index});
    options.worker_index = index;
    options.spec = spec;
    options.heartbeat_interval = absl::Milliseconds(1);
    options.sync_group_bytes = 1;  // every variable in a group of its own
    parts.device = device.get();
    parts.model = model.get();
    parts.variables = job.variables;
    parts.client = client;
    parts.coordinator = chief.get();
    parts.batches = batches.get();
  }

  std::unique_ptr<Device> device;
  std::unique_ptr<Model> model;
  std::unique_ptr<BatchStream> batches;
  std::unique_ptr<LocalCoordinatorClient> chief;
  TrainerOptions options;
  TrainerParts parts;
};

// Ends the job once every worker reported its last step (a trainer's
// Run() waits for that).
class Chief {
 public:
  explicit Chief(JobCoordinator* coordinator, int workers)
      : thread_([this, coordinator, workers] {
          while (!stop_) {
            bool all = coordinator->state() == TRAINING;
            const std::vector<ProgressReport> reports =
                coordinator->LastReports();
            for (int w = 0; w < workers; ++w) {
              all = all && reports[w].finished();
            }
            if (all) coordinator->Succeed();
            absl::SleepFor(absl::Milliseconds(1));
          }
        }) {}
  ~Chief() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(TrainerSyncTest, TwoWorkersAggregateOneGradientPerVariablePerStep) {
  const int64_t kSteps = 15;
  const JobSpec spec = MlpSyncSpec(2, kSteps);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<InProcessJob> job,
                       InProcessJob::Start(spec, TaskId{TaskType::kWorker, 0}));
  ASSERT_EQ(job->variables.size(), 4u);
  Worker w0(*job, spec, 0, job->client.get());
  Worker w1(*job, spec, 1, job->client.get());
  Trainer t0(w0.options, w0.parts), t1(w1.options, w1.parts);
  {
    Chief chief(job->coordinator.get(), 2);
    absl::Status r0, r1;
    std::thread run0([&] { r0 = t0.Run(); });
    std::thread run1([&] { r1 = t1.Run(); });
    run0.join();
    run1.join();
    ASSERT_OK(r0);
    ASSERT_OK(r1);
  }
  EXPECT_EQ(t0.local_steps(), kSteps);
  EXPECT_EQ(t1.local_steps(), kSteps);
  EXPECT_EQ(t0.stale_pushes(), 0);
  EXPECT_EQ(t1.stale_pushes(), 0);
  const StatsResponse stats = job->core->Stats();
  // Each step applied every variable once, from both workers' gradients.
  EXPECT_EQ(stats.updates_applied(), kSteps * 4);
  EXPECT_EQ(stats.stale_gradients_dropped(), 0);
  for (const LogicalVariable& v : job->variables) {
    SCOPED_TRACE(v.name);
    std::vector<float> values(v.num_elements());
    auto pull = job->client->Pull({{v.name, absl::MakeSpan(values)}});
    ASSERT_OK(pull->Wait());
    EXPECT_EQ(pull->min_version(), kSteps);
  }
}

// The in-process server, recording the variables of every batch call.
class RecordingShard final : public PsShard {
 public:
  explicit RecordingShard(ParameterServerCore* core) : inner_(core, "ps-0") {}

  const std::string& name() const override { return inner_.name(); }
  absl::StatusOr<ConfigureResponse> Configure(const ConfigureRequest& r,
                                              absl::Time d) override {
    return inner_.Configure(r, d);
  }
  absl::Status CreateVariables(const CreateVariablesRequest& r,
                               absl::Time d) override {
    return inner_.CreateVariables(r, d);
  }
  absl::StatusOr<StatsResponse> Stats(absl::Time d) override {
    return inner_.Stats(d);
  }
  absl::Status Shutdown(const std::string& r, absl::Time d) override {
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
    {
      MutexLock lock(&mu_);
      std::vector<std::string>& call = pulls_.emplace_back();
      for (const PullRequest& part : h.parts()) {
        call.push_back(part.variable());
      }
    }
    inner_.PullBatch(h, std::move(out), d, std::move(done));
  }
  void PushBatch(
      const PushBatchRequest& h, std::vector<absl::Span<const float>> data,
      std::shared_ptr<const void> owner, absl::Time d,
      std::function<void(absl::StatusOr<PushBatchResponse>)> done) override {
    {
      MutexLock lock(&mu_);
      std::vector<std::string>& call = pushes_.emplace_back();
      for (const PushRequest& part : h.parts()) {
        call.push_back(part.variable());
      }
    }
    if (late) {
      // Applied, but answered as a push that found its step closed.
      done = [done = std::move(done)](absl::StatusOr<PushBatchResponse> r) {
        done(r.ok() ? absl::AbortedError("step closed") : r.status());
      };
    }
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
    inner_.PullRows(h, std::move(ids), std::move(out), d, std::move(done));
  }
  void PushRows(
      const PushRowsRequest& h, std::vector<absl::Span<const int64_t>> ids,
      std::vector<absl::Span<const float>> gradients,
      std::shared_ptr<const void> owner, absl::Time d,
      std::function<void(absl::StatusOr<PushRowsResponse>)> done) override {
    inner_.PushRows(h, std::move(ids), std::move(gradients), std::move(owner),
                    d, std::move(done));
  }

  // Every push answers Aborted (after it was applied).
  std::atomic<bool> late{false};

  using Calls = std::vector<std::vector<std::string>>;
  Calls pushes() const {
    MutexLock lock(&mu_);
    return pushes_;
  }
  Calls pulls() const {
    MutexLock lock(&mu_);
    return pulls_;
  }

 private:
  LocalPsShard inner_;
  mutable Mutex mu_;
  // Per call, in the order the calls reached it: its parts' variables.
  Calls pushes_ ABSL_GUARDED_BY(mu_);
  Calls pulls_ ABSL_GUARDED_BY(mu_);
};

// One worker's job whose server is reached through a RecordingShard.
class RecordedJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = MlpSyncSpec(1, kSteps);
    ASSERT_OK_AND_ASSIGN(
        job_, InProcessJob::Start(spec_, TaskId{TaskType::kWorker, 0}));
    auto recording = std::make_unique<RecordingShard>(job_->core.get());
    shard_ = recording.get();
    std::vector<std::unique_ptr<PsShard>> shards;
    shards.push_back(std::move(recording));
    ASSERT_OK_AND_ASSIGN(Placement placement,
                         PlaceVariables(job_->variables, 1, 1 << 20));
    client_ = std::make_unique<ParameterClient>(std::move(shards), placement,
                                                ParameterClient::Options());
    ASSERT_OK(client_->Configure(spec_.ps_config()));
  }

  // Trains the job to its end.
  void Train(Trainer& trainer) {
    Chief chief(job_->coordinator.get(), 1);
    ASSERT_OK(trainer.Run());
  }

  static constexpr int64_t kSteps = 6;
  JobSpec spec_;
  std::unique_ptr<InProcessJob> job_;
  std::unique_ptr<ParameterClient> client_;
  RecordingShard* shard_ = nullptr;  // owned by client_
};

TEST_F(RecordedJobTest, PushesLeaveInBackwardOrderAndPullsInForwardOrder) {
  Worker w(*job_, spec_, 0, client_.get());
  Trainer trainer(w.options, w.parts);
  ASSERT_NO_FATAL_FAILURE(Train(trainer));
  ASSERT_EQ(trainer.local_steps(), kSteps);
  EXPECT_EQ(job_->core->Stats().updates_applied(), kSteps * 4);
  RecordingShard* shard = shard_;
  const std::vector<LogicalVariable>& v = job_->variables;

  // One call per variable (small ones would otherwise share a call): the
  // output layer's gradients first, as backward finishes them; the hidden
  // layer's parameters first, as forward needs them.
  RecordingShard::Calls backward, forward;
  for (int64_t step = 0; step < kSteps; ++step) {
    for (int i : {2, 3, 0, 1}) backward.push_back({v[i].name});
  }
  // The first pull, then one per step (the last one finds the job's total).
  for (int64_t step = 0; step <= kSteps; ++step) {
    for (int i : {0, 1, 2, 3}) forward.push_back({v[i].name});
  }
  EXPECT_EQ(shard->pushes(), backward);
  EXPECT_EQ(shard->pulls(), forward);
}

// However many groups of a step arrive after it closed, the step counts
// once, as one push for all of them did.
TEST_F(RecordedJobTest, AStepWhoseGroupsAllArriveLateCountsOneStalePush) {
  shard_->late = true;
  Worker w(*job_, spec_, 0, client_.get());
  Trainer trainer(w.options, w.parts);
  ASSERT_NO_FATAL_FAILURE(Train(trainer));
  ASSERT_EQ(trainer.local_steps(), kSteps);
  EXPECT_EQ(shard_->pushes().size(), kSteps * 4);
  EXPECT_EQ(trainer.stale_pushes(), kSteps);
}

}  // namespace
}  // namespace psflow
