#include "worker/trainer.h"

#include <atomic>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/paths.h"
#include "client/ps_shard_test_util.h"
#include "common/clock.h"
#include "common/job/placement.h"
#include "common/mutex.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "tests/forwarding_coordinator.h"
#include "tests/in_process_job.h"

namespace psflow {
namespace {

using ::psflow::testing::InProcessJob;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Two well-separated classes of 4 features: softmax regression learns
// them within a few dozen steps.
std::shared_ptr<Dataset> Separable() {
  auto data = std::make_shared<Dataset>();
  data->num_examples = 512;
  data->example_shape = {4};
  data->num_features = 4;
  data->num_classes = 2;
  std::mt19937 random(7);
  std::uniform_int_distribution<int> noise(0, 60);
  for (int i = 0; i < data->num_examples; ++i) {
    const int label = i % 2;
    data->labels.push_back(label);
    for (int f = 0; f < 4; ++f) {
      const int base = (f < 2) == (label == 0) ? 190 : 10;
      data->features.push_back(static_cast<uint8_t>(base + noise(random)));
    }
  }
  return data;
}

// One worker, one in-process parameter server, an in-process chief: the
// trainer's logic without processes or sockets.
// A chief that has exited: every report fails as a refused connection.
class GoneChief final : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  absl::StatusOr<StatusResponse> ReportProgress(const ProgressReport&,
                                                absl::Duration) override {
    return absl::UnavailableError("chief-0: Connection refused");
  }
};

// A chief that does not answer (a stopped process): each report fails
// at its deadline. Records the deadlines asked for.
class StoppedChief final : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  absl::StatusOr<StatusResponse> ReportProgress(
      const ProgressReport&, absl::Duration timeout) override {
    MutexLock lock(&mu_);
    timeouts_.push_back(timeout);
    return absl::DeadlineExceededError("chief-0: Deadline Exceeded");
  }
  std::vector<absl::Duration> timeouts() const {
    MutexLock lock(&mu_);
    return timeouts_;
  }

 private:
  mutable Mutex mu_;
  std::vector<absl::Duration> timeouts_ ABSL_GUARDED_BY(mu_);
};

// Forwards to the in-process chief and records the global step of every
// progress report that is not a resend of the same one.
class RecordingChief final : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  absl::StatusOr<StatusResponse> ReportProgress(
      const ProgressReport& report, absl::Duration timeout) override {
    {
      MutexLock lock(&mu_);
      if (!report.finished()) steps_.push_back(report.global_step());
    }
    return ForwardingCoordinator::ReportProgress(report, timeout);
  }
  std::vector<int64_t> steps() const {
    MutexLock lock(&mu_);
    return steps_;
  }

 private:
  mutable Mutex mu_;
  std::vector<int64_t> steps_ ABSL_GUARDED_BY(mu_);
};

class TrainerTest : public ::testing::Test {
 protected:
  ~TrainerTest() override { StopChief(); }

  // The chief's part at the end of training: once every worker trained its
  // last step, the job succeeds (a trainer waits for that before Run()
  // returns). Runs on the current job_ until StopChief().
  void RunChief() {
    StopChief();
    stop_chief_ = false;
    chief_ = std::thread([this, coordinator = job_->coordinator.get()] {
      while (!stop_chief_) {
        if (Finished(*coordinator) && coordinator->state() == TRAINING) {
          coordinator->Succeed();
        }
        absl::SleepFor(absl::Milliseconds(1));
      }
    });
  }
  // Whether worker 0 reported its last step of the current model.
  static bool Finished(const JobCoordinator& coordinator) {
    const ProgressReport last = coordinator.LastReports()[0];
    return last.finished() &&
           last.generation() == coordinator.Status().generation();
  }
  static void WaitUntilFinished(const JobCoordinator& coordinator) {
    while (!Finished(coordinator)) absl::SleepFor(absl::Milliseconds(1));
  }
  void StopChief() {
    stop_chief_ = true;
    if (chief_.joinable()) chief_.join();
  }
  // For a test that plays the chief: saves the model at step 0 into the
  // temporary directory `name` and sets `path` to the checkpoint.
  void SaveFirstCheckpoint(const std::string& name, UpdateMode mode,
                           std::string& path) {
    CheckpointManagerOptions checkpoints;
    checkpoints.directory = JoinPath(::testing::TempDir(), name);
    checkpoints.mode = mode;
    checkpoints.optimizer = options_.spec.ps_config().optimizer();
    ASSERT_OK_AND_ASSIGN(
        std::unique_ptr<CheckpointManager> manager,
        CheckpointManager::Create(checkpoints, job_->client.get()));
    ASSERT_OK_AND_ASSIGN(SavedCheckpoint initial, manager->Save());
    ASSERT_EQ(initial.step, 0);
    path = initial.path;
  }
  // As the chief after losing a parameter server: pauses the job, restores
  // the checkpoint at `path` and resumes from its step.
  void RestoreAndResume(const std::string& path) {
    JobCoordinator& chief = *job_->coordinator;
    ASSERT_TRUE(chief.Pause("a parameter server was lost"));
    ASSERT_OK_AND_ASSIGN(
        int64_t step,
        RestoreCheckpoint(path, options_.spec.ps_config().optimizer(),
                          *job_->client, absl::Seconds(30)));
    chief.Resume(step);
  }

  // SetUpJob with a model of embedding tables on click-through data.
  void SetUpTablesJob(UpdateMode mode, int64_t total_steps);
  // BoundedWorkerWaitsForTheSlowestAndGoesOnWhenItIsLost, for prefetch_.
  void ExpectBoundedWorkerWaitsForTheSlowest();

  void SetUpJob(UpdateMode mode, int64_t total_steps,
                bool configure_servers = true, Clock* clock = &RealClock()) {
    StopChief();
    JobSpec& spec = options_.spec;
    spec = testing::SoftmaxRegressionSpec(mode, total_steps, 0.5);
    if (mode == BOUNDED) {
      // Two workers (this trainer is worker 0), max_staleness 1.
      spec.set_num_workers(2);
      spec.mutable_ps_config()->set_num_workers(2);
      spec.mutable_ps_config()->set_max_staleness(1);
      spec.mutable_config()->mutable_training()->set_max_staleness(1);
    }
    JobConfig& job = *spec.mutable_config();
    job.mutable_training()->set_batch_size(16);
    job.mutable_training()->set_parameter_prefetch(prefetch_);
    job.mutable_logging()->set_log_every_steps(1000);

    ASSERT_OK_AND_ASSIGN(job_,
                         InProcessJob::Start(spec, TaskId{TaskType::kWorker, 0},
                                             configure_servers, clock));
    device_ = CreateCpuDevice(1);
    ASSERT_OK_AND_ASSIGN(model_,
                         job_->definition->Instantiate(device_.get(), 16));
    BatchStream::Options stream;
    stream.batch_size = 16;
    stream.seed = 3;
    batches_ = std::make_unique<BatchStream>(Separable(), stream);

    options_.heartbeat_interval = absl::Milliseconds(1);
    parts_.clock = clock;
    parts_.device = device_.get();
    parts_.model = model_.get();
    parts_.variables = job_->variables;
    parts_.tables.clear();  // SetUpTablesJob sets them
    parts_.client = job_->client.get();
    parts_.coordinator = job_->chief.get();
    parts_.batches = batches_.get();
    RunChief();
  }

  // When SetUpJob's worker pulls its next parameters (not SYNC).
  TrainingConfig::ParameterPrefetch prefetch_ = TrainingConfig::AUTO;
  TrainerOptions options_;
  TrainerParts parts_;
  std::unique_ptr<InProcessJob> job_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<BatchStream> batches_;
  std::atomic<bool> stop_chief_{false};
  std::thread chief_;
};

// Click-through-rate examples: field 0's id decides the click (ids 0-4
// click, 5-9 do not), field 1 is noise, one dense feature is constant.
std::shared_ptr<CtrExamples> PlantedClicks() {
  auto data = std::make_shared<CtrExamples>();
  data->num_dense = 1;
  data->num_fields = 2;
  data->num_examples = 512;
  data->offsets.push_back(0);
  std::mt19937 random(11);
  for (int64_t i = 0; i < data->num_examples; ++i) {
    const int64_t decisive = random() % 10;
    data->ids.push_back(decisive);
    data->offsets.push_back(static_cast<int64_t>(data->ids.size()));
    data->ids.push_back((int64_t{1} << 48) | (random() % 20));
    data->offsets.push_back(static_cast<int64_t>(data->ids.size()));
    data->dense.push_back(1.0f);
    data->labels.push_back(decisive < 5 ? 1 : 0);
  }
  return data;
}

// SetUpJob, then a wide-and-deep model on PlantedClicks instead.
void TrainerTest::SetUpTablesJob(UpdateMode mode, int64_t total_steps) {
  SetUpJob(mode, total_steps);
  JobSpec& spec = options_.spec;
  ModelConfig& model = *spec.mutable_config()->mutable_model();
  model.Clear();
  model.mutable_wide_deep()->set_embedding_dim(4);
  model.mutable_wide_deep()->add_hidden_sizes(8);
  spec.clear_example_shape();
  spec.add_example_shape(1);
  spec.set_num_fields(2);
  spec.mutable_ps_config()->mutable_optimizer()->set_kind(
      OptimizerConfig::ADAGRAD);
  spec.mutable_ps_config()->mutable_learning_rate()->set_learning_rate(0.1);
  StopChief();
  ASSERT_OK_AND_ASSIGN(
      job_, InProcessJob::Start(spec, TaskId{TaskType::kWorker, 0}, true));
  RunChief();
  ASSERT_OK_AND_ASSIGN(model_,
                       job_->definition->Instantiate(device_.get(), 16));
  BatchStream::Options stream;
  stream.batch_size = 16;
  stream.seed = 3;
  batches_ = std::make_unique<BatchStream>(PlantedClicks(), stream);
  parts_.model = model_.get();
  parts_.variables = job_->variables;
  parts_.tables = job_->definition->tables();
  parts_.client = job_->client.get();
  parts_.coordinator = job_->chief.get();
  parts_.batches = batches_.get();
}

// A wide-and-deep model learns through its embedding tables: every step
// pulls its batch's rows and pushes their gradients (not SYNC: the next
// batch's rows travel while this one computes, and the push while the
// next one does).
TEST_F(TrainerTest, AModelWithTablesLearnsThroughItsRows) {
  for (UpdateMode mode : {ASYNC, SYNC, BOUNDED}) {
    SCOPED_TRACE(UpdateMode_Name(mode));
    ASSERT_NO_FATAL_FAILURE(SetUpTablesJob(mode, 120));
    // BOUNDED: worker 1 never comes; worker 0 trains alone.
    if (mode == BOUNDED) {
      ASSERT_OK(job_->client->ExcludeWorkers({1}));
    }
    Trainer trainer(options_, parts_);
    ASSERT_OK(trainer.Run());
    const StatsResponse stats = job_->core->Stats();
    ASSERT_EQ(stats.tables_size(), 2);
    // Ten decisive ids and twenty noise ids: every one got a row.
    EXPECT_EQ(stats.tables(0).rows(), 30);
    EXPECT_GE(stats.tables(0).version(), 120);
    EXPECT_GT(stats.tables(1).rows_pushed(), 0);
    const ProgressReport last = job_->coordinator->LastReports()[0];
    EXPECT_GT(last.accuracy(), 0.9) << "the last window's batches";
  }
}

// Rows gradients count in the servers' staleness histogram as dense ones
// do: every applied update once. With the next batch's rows prefetched,
// a lone async worker's rows are pushed one table update stale.
TEST_F(TrainerTest, RowsPushesCountInTheStalenessHistogram) {
  ASSERT_NO_FATAL_FAILURE(SetUpTablesJob(ASYNC, 60));
  Trainer trainer(options_, parts_);
  ASSERT_OK(trainer.Run());
  const StatsResponse stats = job_->core->Stats();
  int64_t counted = 0;
  for (int64_t count : stats.staleness_counts()) counted += count;
  EXPECT_EQ(counted, stats.updates_applied());
  ASSERT_GE(stats.staleness_counts_size(), 2);
  EXPECT_GT(stats.staleness_counts(1), 0) << "one update stale";
}

// BOUNDED: the rows prefetch is for the worker's next step, so the servers
// hold it back exactly as the dense prefetch. Worker 1 stands still:
// worker 0's step-2 pulls (dense and rows, both sent during its step 1)
// wait until the chief drops worker 1. A rows prefetch sent for any other
// step, or without a clock, would not wait: one wait, not two.
TEST_F(TrainerTest, ABoundedWorkersRowsPrefetchWaitsForTheSlowestWorker) {
  ASSERT_NO_FATAL_FAILURE(SetUpTablesJob(BOUNDED, 30));
  absl::Status result;
  Trainer trainer(options_, parts_);
  std::thread run([&] { result = trainer.Run(); });
  // Both step-2 pulls reach the server (the rows prefetch from the
  // trainer's background thread) and wait there. (A rows pull that did not
  // wait never shows: the generous deadline turns that hang into a
  // failure.)
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (job_->core->worker_clocks()->waiting() < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(job_->core->worker_clocks()->waiting(), 2);
  EXPECT_EQ(job_->core->Stats().worker_clocks(0), 2);
  EXPECT_EQ(job_->core->Stats().bounded_waits(), 0) << "still waiting";
  ASSERT_OK(job_->client->ExcludeWorkers({1}));
  run.join();
  ASSERT_OK(result);
  EXPECT_EQ(job_->core->Stats().bounded_waits(), 2);
  EXPECT_GE(job_->core->Stats().worker_clocks(0), 29);
}

TEST_F(TrainerTest, AsyncTrainsToTheJobsTotalAndLearns) {
  SetUpJob(ASYNC, 60);
  Trainer trainer(options_, parts_);
  ASSERT_OK(trainer.Run());
  EXPECT_GE(job_->core->Stats().updates_applied(), 60);
  const ProgressReport last = job_->coordinator->LastReports()[0];
  EXPECT_TRUE(last.finished());
  EXPECT_GE(last.global_step(), 60);
  EXPECT_GT(last.accuracy(), 0.9) << "the last window's batches";
}

// On the CPU backend a worker keeps its parameters and gradients in memory
// its server shares, one run per set. A push that fails as if the server
// might still read it (Unavailable) retires that memory: the worker moves
// the set to fresh memory before it trains on, and still finishes the job.
TEST_F(TrainerTest, TensorsAServerMayStillUseAreMovedToFreshMemory) {
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "push then pull" : "push, then pull");
    ASSERT_NO_FATAL_FAILURE(SetUpJob(ASYNC, 60));
    options_.push_then_pull = fused;
    options_.recovery.chief_notice_time = absl::ZeroDuration();
    options_.recovery.poll_interval = absl::Milliseconds(1);
    job_->ShareMemory();
    job_->FailPushesFrom(20, /*count=*/1);
    Trainer trainer(options_, parts_);
    ASSERT_OK(trainer.Run());
    EXPECT_EQ(job_->failed_pushes(), 1);
    // Two sets of parameters and two of gradients, then the set the failed
    // push was sent from.
    EXPECT_EQ(job_->shared_allocations(), 5);
    EXPECT_GE(job_->core->Stats().updates_applied(), 60);
    EXPECT_GT(job_->coordinator->LastReports()[0].accuracy(), 0.9);
  }
}

// A replacement that finds the server's region not ready yet places that
// set in ordinary memory; the next restart moves it back into shared
// memory rather than copying on every call for the rest of the job.
TEST_F(TrainerTest, ASetPlacedInOrdinaryMemoryGoesBackToSharedMemory) {
  ASSERT_NO_FATAL_FAILURE(SetUpJob(ASYNC, 60));
  options_.push_then_pull = false;
  options_.recovery.chief_notice_time = absl::ZeroDuration();
  options_.recovery.poll_interval = absl::Milliseconds(1);
  job_->ShareMemory();
  job_->RefuseSharedAllocations(/*after=*/4, /*count=*/1);
  // Two failed pushes far apart, each a restart: the first replaces its
  // set (into ordinary memory: refused), the second replaces its own and
  // retries the first.
  job_->FailPushesFrom(20, /*count=*/1);
  job_->FailPushesFrom(40, /*count=*/1);
  Trainer trainer(options_, parts_);
  ASSERT_OK(trainer.Run());
  EXPECT_EQ(job_->failed_pushes(), 2);
  EXPECT_EQ(job_->shared_allocations(), 4 + 2);
  EXPECT_GE(job_->core->Stats().updates_applied(), 60);
}

// A lone async worker that pulls after its push is applied computes every
// gradient on the parameters its previous one made: staleness 0, always.
// Prefetching, it pulls the next parameters before pushing this step's
// gradient: every push but the first is at least one update stale. Pushes
// reach the server late (DeferPushes), so a fresh pull that did not wait
// for its push to be applied would read the values without it.
TEST_F(TrainerTest, AFreshPullHoldsTheWorkersOwnLastGradient) {
  for (const auto prefetch : {TrainingConfig::NEVER, TrainingConfig::ALWAYS}) {
    SCOPED_TRACE(TrainingConfig::ParameterPrefetch_Name(prefetch));
    prefetch_ = prefetch;
    SetUpJob(ASYNC, 40);
    job_->DeferPushes(absl::Milliseconds(2));
    Trainer trainer(options_, parts_);
    ASSERT_OK(trainer.Run());
    const StatsResponse stats = job_->core->Stats();
    ASSERT_GE(stats.updates_applied(), 40);
    ASSERT_GE(stats.staleness_counts_size(), 1);
    int64_t counted = 0;
    for (int64_t count : stats.staleness_counts()) counted += count;
    EXPECT_EQ(counted, stats.updates_applied());
    if (prefetch == TrainingConfig::NEVER) {
      EXPECT_EQ(stats.staleness_counts(0), stats.updates_applied());
    } else {
      // Only the first push's chunks (of 40 pushes).
      EXPECT_LT(stats.staleness_counts(0) * 10, stats.updates_applied());
    }
  }
}

// A prefetch is started after the pushes before it (the background thread
// keeps their order): the parameters and rows for step n + 1, pulled while
// step n computes, hold every update through step n - 1, so a lone
// worker's gradients are exactly one update stale, never two. (A prefetch
// that overtook the last push missed the worker's own update: on a GPU
// host the MLP lost most of a point of accuracy to it.)
TEST_F(TrainerTest, APrefetchNeverOvertakesTheLastPush) {
  for (const bool background : {true, false}) {
    SCOPED_TRACE(background ? "background calls" : "inline calls");
    prefetch_ = TrainingConfig::ALWAYS;
    // With tables: only those models start their calls on the thread.
    ASSERT_NO_FATAL_FAILURE(SetUpTablesJob(ASYNC, 200));
    options_.background_calls = background;
    Trainer trainer(options_, parts_);
    ASSERT_OK(trainer.Run());
    const StatsResponse stats = job_->core->Stats();
    ASSERT_GE(stats.updates_applied(), 200);
    for (int staleness = 2; staleness < stats.staleness_counts_size();
         ++staleness) {
      EXPECT_EQ(stats.staleness_counts(staleness), 0)
          << "updates " << staleness << " stale";
    }
  }
}

// A push that carries the next pull (push_then_pull) reads the same
// values as a push and then a pull: a lone worker's gradients are one
// update stale when it prefetches and fresh when it does not, and the
// adaptive policy's switches between the two (its choice for a step made
// as the step before pushes) never lose or double a pull.
TEST_F(TrainerTest, APushThatCarriesThePullKeepsTheStaleness) {
  for (const auto prefetch :
       {TrainingConfig::ALWAYS, TrainingConfig::NEVER, TrainingConfig::AUTO}) {
    for (const bool fused : {true, false}) {
      SCOPED_TRACE(
          absl::StrCat(TrainingConfig::ParameterPrefetch_Name(prefetch),
                       fused ? ", push then pull" : ", two calls"));
      prefetch_ = prefetch;
      ASSERT_NO_FATAL_FAILURE(SetUpJob(ASYNC, 200));
      options_.push_then_pull = fused;
      Trainer trainer(options_, parts_);
      ASSERT_OK(trainer.Run());
      // A prefetching worker may take one step past the total (its last
      // prefetch is one update behind), either way.
      EXPECT_GE(trainer.local_steps(), 200);
      EXPECT_LE(trainer.local_steps(), 201);
      const StatsResponse stats = job_->core->Stats();
      // Kernel and bias, every step.
      EXPECT_EQ(stats.updates_applied(), trainer.local_steps() * 2);
      const int most_stale = prefetch == TrainingConfig::NEVER ? 0 : 1;
      for (int staleness = most_stale + 1;
           staleness < stats.staleness_counts_size(); ++staleness) {
        EXPECT_EQ(stats.staleness_counts(staleness), 0)
            << "updates " << staleness << " stale";
      }
      if (prefetch == TrainingConfig::ALWAYS) {
        // All but the first step's push (its parameters came first).
        EXPECT_GE(stats.staleness_counts(1), 2 * 198);
      }
      // It learned (the last reported window of batches).
      EXPECT_GT(job_->coordinator->LastReports()[0].accuracy(), 0.9);
    }
  }
}

// A push still in flight when training ends carries a gradient past the
// job's total (a prefetching worker takes a step more than it needed); a
// server that resets its connection as the job ends fails that push, and
// the job must still succeed: it once failed the worker, and the job with
// it.
TEST_F(TrainerTest, APushPastTheTotalThatFailsDoesNotFailTheWorker) {
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "push then pull" : "two calls");
    prefetch_ = TrainingConfig::ALWAYS;
    ASSERT_NO_FATAL_FAILURE(SetUpJob(ASYNC, 200));
    options_.push_then_pull = fused;
    // Only the step past the total computes at global step 199 (each of a
    // lone prefetching worker's gradients is one update stale).
    job_->FailPushesFrom(199);
    Trainer trainer(options_, parts_);
    ASSERT_OK(trainer.Run());
    EXPECT_GE(job_->failed_pushes(), 1);
    EXPECT_EQ(job_->core->Stats().updates_applied(), 200 * 2);
  }
}

// Saves due every 20 steps: the worker reports as soon as its parameters
// reach each multiple, although its heartbeat interval is an hour. Once
// each, not at every later step; and no sooner than early_report_spacing
// after the previous report (an hour here: only the first is brought
// forward).
TEST_F(TrainerTest, AWorkerReportsAtOnceWhenItReachesASavesStep) {
  for (const absl::Duration spacing : {absl::ZeroDuration(), absl::Hours(1)}) {
    SCOPED_TRACE(absl::FormatDuration(spacing));
    SetUpJob(ASYNC, 70);
    options_.heartbeat_interval = absl::Hours(1);
    options_.early_report_spacing = spacing;
    job_->coordinator->WatchForStep(20, 20);
    RecordingChief chief(job_->chief.get());
    parts_.coordinator = &chief;
    Trainer trainer(options_, parts_);
    ASSERT_OK(trainer.Run());
    std::vector<int64_t> multiples;  // of the reports past the first
    for (const int64_t step : chief.steps()) {
      if (step > 0) multiples.push_back(step / 20);
    }
    if (spacing == absl::ZeroDuration()) {
      EXPECT_THAT(multiples, ElementsAre(1, 2, 3))
          << absl::StrJoin(chief.steps(), ", ");
    } else {
      EXPECT_THAT(multiples, ElementsAre(1))
          << absl::StrJoin(chief.steps(), ", ");
    }
  }
}

// With a heartbeat after every step, the final report's window is empty:
// it repeats the latest measured accuracy instead of reporting zero.
TEST_F(TrainerTest, HeartbeatsWithoutNewStepsKeepTheLatestAccuracy) {
  SetUpJob(ASYNC, 60);
  options_.heartbeat_interval = absl::ZeroDuration();
  Trainer trainer(options_, parts_);
  ASSERT_OK(trainer.Run());
  const ProgressReport last = job_->coordinator->LastReports()[0];
  EXPECT_TRUE(last.finished());
  EXPECT_GT(last.accuracy(), 0.9);
  EXPECT_GT(last.loss(), 0);
  EXPECT_EQ(last.examples_per_sec(), 0) << "no examples since the last one";
}

TEST_F(TrainerTest, SyncTakesOneStepPerGlobalStep) {
  SetUpJob(SYNC, 25);
  Trainer trainer(options_, parts_);
  ASSERT_OK(trainer.Run());
  EXPECT_EQ(trainer.local_steps(), 25);
  EXPECT_EQ(trainer.stale_pushes(), 0);
  EXPECT_EQ(job_->core->Stats().updates_applied(), 25 * 2);  // kernel and bias
}

// The phases are measured on every run (they go into the "finished" line),
// metrics endpoint or not, and never add up to more than the run took.
TEST_F(TrainerTest, MeasuresWhereTheStepsTimeWent) {
  SetUpJob(SYNC, 25);
  Trainer trainer(options_, parts_);
  const absl::Time start = absl::Now();
  ASSERT_OK(trainer.Run());
  const absl::Duration run = absl::Now() - start;
  const Trainer::PhaseTotals& phases = trainer.phase_totals();
  EXPECT_GT(phases.compute, absl::ZeroDuration());
  EXPECT_GT(phases.pull_wait, absl::ZeroDuration()) << "sync pulls every step";
  EXPECT_GT(phases.push_wait, absl::ZeroDuration()) << "sync waits every push";
  EXPECT_LE(phases.compute + phases.pull_wait + phases.push_wait, run);
}

// With tables, outside SYNC, the rows' pulls and pushes are started
// (ids found, routed, gradients summed) without waiting: that time is
// measured apart, within what the run took.
TEST_F(TrainerTest, MeasuresTheRowsSetupApartFromTheWaits) {
  for (const bool background : {true, false}) {
    SCOPED_TRACE(background ? "background calls" : "inline calls");
    ASSERT_NO_FATAL_FAILURE(SetUpTablesJob(ASYNC, 40));
    options_.background_calls = background;
    Trainer trainer(options_, parts_);
    const absl::Time start = absl::Now();
    ASSERT_OK(trainer.Run());
    const absl::Duration run = absl::Now() - start;
    const Trainer::PhaseTotals& phases = trainer.phase_totals();
    EXPECT_GT(phases.compute, absl::ZeroDuration());
    EXPECT_GT(phases.rows_setup, absl::ZeroDuration());
    EXPECT_LE(phases.compute + phases.pull_wait + phases.push_wait +
                  phases.rows_setup,
              run);
    // The background thread's time is apart from the step's.
    EXPECT_EQ(phases.background > absl::ZeroDuration(), background);
  }
}

// Without the background thread the training thread starts the calls
// itself, between steps: the same training, the same accounting.
TEST_F(TrainerTest, WithoutTheBackgroundThreadCallsStartInline) {
  ASSERT_NO_FATAL_FAILURE(SetUpTablesJob(ASYNC, 60));
  options_.background_calls = false;
  Trainer trainer(options_, parts_);
  ASSERT_OK(trainer.Run());
  const StatsResponse stats = job_->core->Stats();
  EXPECT_GE(stats.tables(0).version(), 60);
  int64_t counted = 0;
  for (int64_t count : stats.staleness_counts()) counted += count;
  EXPECT_EQ(counted, stats.updates_applied());

  SetUpJob(ASYNC, 60);
  Trainer dense(options_, parts_);
  ASSERT_OK(dense.Run());
  EXPECT_GE(job_->core->Stats().updates_applied(), 60);
  EXPECT_GT(job_->coordinator->LastReports()[0].accuracy(), 0.9);
}

// Worker 0 trains while worker 1 (pushed by hand here) stands still: with
// max_staleness 1 worker 0 stops after its step 1, goes on one step per
// step of worker 1, and runs free once the chief excludes worker 1.
// Prefetched or fresh, the next parameters wait for the same bound.
TEST_F(TrainerTest, BoundedWorkerWaitsForTheSlowestAndGoesOnWhenItIsLost) {
  for (const auto prefetch : {TrainingConfig::ALWAYS, TrainingConfig::NEVER}) {
    SCOPED_TRACE(TrainingConfig::ParameterPrefetch_Name(prefetch));
    prefetch_ = prefetch;
    ExpectBoundedWorkerWaitsForTheSlowest();
  }
}

void TrainerTest::ExpectBoundedWorkerWaitsForTheSlowest() {
  SetUpJob(BOUNDED, 30);
  auto clock_of = [this](int worker) {
    return job_->core->Stats().worker_clocks(worker);
  };
  auto wait_for_clock = [&](int worker, int64_t clock) {
    while (clock_of(worker) < clock) absl::SleepFor(absl::Milliseconds(1));
  };
  absl::Status result;
  Trainer trainer(options_, parts_);
  std::thread run([&] { result = trainer.Run(); });

  wait_for_clock(0, 2);
  // Step 2 needs worker 1 at step 1: however long we wait, no progress.
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(clock_of(0), 2);

  std::vector<std::vector<float>> zeros;
  std::vector<ParameterClient::Const> gradients;
  for (const LogicalVariable& v : job_->variables) {
    zeros.emplace_back(v.num_elements(), 0.0f);
  }
  for (size_t i = 0; i < zeros.size(); ++i) {
    gradients.emplace_back(job_->variables[i].name, zeros[i]);
  }
  ASSERT_OK(
      job_->client->Push(gradients, 0, /*worker=*/1, /*clock=*/0)->Wait());
  wait_for_clock(0, 3);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(clock_of(0), 3);

  // The chief declares worker 1 lost: worker 0 trains to the end.
  ASSERT_OK(job_->client->ExcludeWorkers({1}));
  run.join();
  ASSERT_OK(result);
  EXPECT_GE(job_->core->Stats().updates_applied(), 30);
  EXPECT_GE(job_->core->Stats().bounded_waits(), 2);
  EXPECT_GE(trainer.local_steps(), 29);
}

// Counts the heartbeats that reach the chief.
class CountingCoordinator final : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  absl::StatusOr<StatusResponse> ReportProgress(
      const ProgressReport& report, absl::Duration timeout) override {
    ++reports;
    return ForwardingCoordinator::ReportProgress(report, timeout);
  }
  std::atomic<int> reports{0};
};

// A worker blocked on a pull (here: waiting for a slower worker) keeps
// reporting, so the chief never declares it lost for waiting.
TEST_F(TrainerTest, AWaitingWorkerKeepsHeartbeating) {
  SetUpJob(BOUNDED, 30);
  CountingCoordinator counting(parts_.coordinator);
  parts_.coordinator = &counting;
  options_.heartbeat_interval = absl::Milliseconds(100);
  Trainer trainer(options_, parts_);
  absl::Status result;
  std::thread run([&] { result = trainer.Run(); });
  while (job_->core->Stats().worker_clocks(0) < 2) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  // Blocked for good (worker 1 never pushes): reports keep coming.
  const int blocked_at = counting.reports.load();
  while (counting.reports.load() < blocked_at + 3) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(job_->core->Stats().worker_clocks(0), 2);
  ASSERT_OK(job_->client->ExcludeWorkers({1}));
  run.join();
  EXPECT_OK(result);
}

// A chief that restarted answers INITIALIZING (with a generation of its
// own) until it has restored the model. A worker waits for it to train
// again rather than train on a model about to be replaced.
//
// The chief "restarts" itself at the first report of a worker in the middle
// of its training (past `restart_after_steps`), so the restore always lands
// during training however fast the machine trains; the test ends the
// restore (`Restored`) and then the job.
class RestartingChief final : public testing::ForwardingCoordinator {
 public:
  // `client` reaches `chief`.
  RestartingChief(CoordinatorClient* client, JobCoordinator* chief,
                  int64_t restart_after_steps)
      : ForwardingCoordinator(client),
        chief_(chief),
        restart_after_steps_(restart_after_steps) {}
  absl::StatusOr<StatusResponse> ReportProgress(
      const ProgressReport& report, absl::Duration timeout) override {
    if (!restarted_ && !report.finished() &&
        report.local_steps() >= restart_after_steps_) {
      restarted_ = true;
      initializing_ = true;
    }
    if (initializing_) {
      ++answered_initializing_;
      StatusResponse status;
      status.set_state(INITIALIZING);
      status.set_generation(424242);
      return status;
    }
    return ForwardingCoordinator::ReportProgress(report, timeout);
  }
  int answered_initializing() const { return answered_initializing_; }
  // The model is back: the chief trains again (the generation as before
  // here).
  void Restored() { initializing_ = false; }
  // The test's end: the job succeeds with the worker still training.
  void EndJob() { chief_->Succeed(); }

 private:
  JobCoordinator* const chief_;
  const int64_t restart_after_steps_;
  std::atomic<bool> restarted_{false};
  std::atomic<bool> initializing_{false};
  std::atomic<int> answered_initializing_{0};
};

// More steps than any of these tests lets a worker train: the job ends
// when the test says so.
constexpr int64_t kUntilTheTestEndsIt = 100'000'000;

// Runs `trainer` while `chief` restarts, checks that the worker trains
// nothing while the chief restores, and that it trains again afterwards
// (`progress` counts the work the servers applied).
void ExpectTheWorkerWaitsForTheRestore(
    Trainer& trainer, RestartingChief& chief,
    const std::function<int64_t()>& progress) {
  absl::Status result;
  std::thread run([&] { result = trainer.Run(); });
  while (chief.answered_initializing() < 3) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const int64_t waiting_at = progress();
  while (chief.answered_initializing() < 10) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(progress(), waiting_at) << "trained while the chief was restoring";
  chief.Restored();
  while (progress() < waiting_at + 20) absl::SleepFor(absl::Milliseconds(1));
  chief.EndJob();
  run.join();
  EXPECT_OK(result);
}

TEST_F(TrainerTest, AWorkerWaitsWhileARestartedChiefRestoresTheModel) {
  SetUpJob(ASYNC, kUntilTheTestEndsIt);
  StopChief();  // the job ends when the test ends it
  RestartingChief chief(job_->chief.get(), job_->coordinator.get(),
                        /*restart_after_steps=*/20);
  parts_.coordinator = &chief;
  options_.heartbeat_interval = absl::Milliseconds(5);
  Trainer trainer(options_, parts_);
  ExpectTheWorkerWaitsForTheRestore(
      trainer, chief, [this] { return job_->core->Stats().updates_applied(); });
}

// The same with embedding tables: the pause reaches the rows prefetch and
// the rows pushes in flight (pulled again afterwards, not used stale).
TEST_F(TrainerTest, AWorkerWithTablesWaitsWhileARestartedChiefRestores) {
  ASSERT_NO_FATAL_FAILURE(SetUpTablesJob(ASYNC, kUntilTheTestEndsIt));
  StopChief();
  RestartingChief chief(job_->chief.get(), job_->coordinator.get(),
                        /*restart_after_steps=*/20);
  parts_.coordinator = &chief;
  options_.heartbeat_interval = absl::Milliseconds(5);
  Trainer trainer(options_, parts_);
  ExpectTheWorkerWaitsForTheRestore(trainer, chief, [this] {
    return job_->core->Stats().tables(0).version();
  });
}

// The chief finishes training while this worker still trains (another
// worker's push reached the total, or an operator ended training): the
// worker stops at its next heartbeat rather than change the final model,
// and waits for the job's end.
TEST_F(TrainerTest, AWorkerStopsWhenTheChiefFinishesTrainingWithoutIt) {
  SetUpJob(ASYNC, kUntilTheTestEndsIt);
  StopChief();  // this test plays the chief
  Trainer trainer(options_, parts_);
  absl::Status result;
  std::thread run([&] { result = trainer.Run(); });
  while (job_->core->Stats().updates_applied() < 20) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  job_->coordinator->BeginFinalEvaluation();
  WaitUntilFinished(*job_->coordinator);
  const int64_t stopped_at = job_->core->Stats().updates_applied();
  // A few more heartbeats of the waiting worker: nothing more is trained.
  const int64_t reports = job_->coordinator->LastReports()[0].examples();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(job_->core->Stats().updates_applied(), stopped_at);
  EXPECT_EQ(job_->coordinator->LastReports()[0].examples(), reports);
  job_->coordinator->Succeed();
  run.join();
  EXPECT_OK(result);
  EXPECT_LT(trainer.local_steps(), kUntilTheTestEndsIt);
}

TEST_F(TrainerTest, ARestartedBoundedWorkerJoinsAtTheSlowestClock) {
  SetUpJob(BOUNDED, 20);
  // Worker 1 is far ahead (it trained while worker 0 was away) and then
  // left the bound; worker 0 restarts with a clock of 0.
  std::vector<std::vector<float>> zeros;
  std::vector<ParameterClient::Const> gradients;
  for (const LogicalVariable& v : job_->variables) {
    zeros.emplace_back(v.num_elements(), 0.0f);
  }
  for (size_t i = 0; i < zeros.size(); ++i) {
    gradients.emplace_back(job_->variables[i].name, zeros[i]);
  }
  for (int64_t step = 0; step < 5; ++step) {
    ASSERT_OK(job_->client->Push(gradients, step, 1, step)->Wait());
  }
  Trainer trainer(options_, parts_);
  std::thread run([&] { ASSERT_OK(trainer.Run()); });
  // It joins at worker 1's clock (5) rather than holding worker 1 back by
  // five steps: its first pushes are its steps 5 and 6.
  while (job_->core->Stats().worker_clocks(0) < 5) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_OK(job_->client->ExcludeWorkers({1}));
  run.join();
  EXPECT_GE(job_->core->Stats().worker_clocks(0), 5 + trainer.local_steps());
}

// After its last step a worker stays until the chief ends the job, and
// leaves with the job's outcome.
TEST_F(TrainerTest, AFinishedWorkerWaitsForTheJobsEnd) {
  for (const bool succeed : {true, false}) {
    SCOPED_TRACE(succeed ? "succeeded" : "failed");
    SetUpJob(ASYNC, 20);
    StopChief();  // this test plays the chief
    Trainer trainer(options_, parts_);
    absl::Status result;
    std::atomic<bool> returned{false};
    std::thread run([&] {
      result = trainer.Run();
      returned = true;
    });
    JobCoordinator& chief = *job_->coordinator;
    WaitUntilFinished(chief);
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_FALSE(returned) << "left before the job ended";
    if (succeed) {
      chief.Succeed();
    } else {
      chief.Fail("the final checkpoint failed: disk full");
    }
    run.join();
    if (succeed) {
      EXPECT_OK(result);
    } else {
      EXPECT_THAT(result, StatusIs(absl::StatusCode::kAborted,
                                   AllOf(HasSubstr("after this worker's last "
                                                   "step"),
                                         HasSubstr("disk full"))));
    }
  }
}

// A parameter server lost during the final checkpoint: the chief restores
// an earlier checkpoint after every worker's last step. The workers, still
// in the job, train the steps since again, and the job ends after them.
TEST_F(TrainerTest, AWorkerTrainsAgainWhenTheModelIsRestoredAfterItsLastStep) {
  for (UpdateMode mode : {ASYNC, SYNC}) {
    SCOPED_TRACE(UpdateMode_Name(mode));
    SetUpJob(mode, 25);
    StopChief();  // this test plays the chief
    std::string initial;
    ASSERT_NO_FATAL_FAILURE(SaveFirstCheckpoint(
        "restore_after_last_step_" + UpdateMode_Name(mode), mode, initial));

    Trainer trainer(options_, parts_);
    absl::Status result;
    std::atomic<bool> returned{false};
    std::thread run([&] {
      result = trainer.Run();
      returned = true;
    });
    JobCoordinator& chief = *job_->coordinator;
    WaitUntilFinished(chief);
    const int64_t first_run = chief.LastReports()[0].local_steps();
    EXPECT_GE(first_run, 24);
    ASSERT_FALSE(returned);
    ASSERT_NO_FATAL_FAILURE(RestoreAndResume(initial));
    // The old generation's "finished" no longer counts: the worker trains
    // the restored steps and reports its last step again.
    WaitUntilFinished(chief);
    chief.Succeed();
    run.join();
    ASSERT_OK(result);
    EXPECT_GE(trainer.local_steps(), first_run + 24) << "trained again";
    if (mode == SYNC) {
      EXPECT_EQ(trainer.local_steps(), 2 * 25);
    }
    EXPECT_GE(job_->core->Stats().updates_applied(), 2 * 25 * 2);
  }
}

// A push past the job's total that fails unanswered leaves its gradients
// to the server; when a restore has the worker train again, that memory is
// replaced before the new run computes in it.
TEST_F(TrainerTest, ARunAfterARestoreTrainsInFreshMemory) {
  prefetch_ = TrainingConfig::ALWAYS;
  ASSERT_NO_FATAL_FAILURE(SetUpJob(ASYNC, 25));
  StopChief();  // this test plays the chief
  job_->ShareMemory();
  // Only the step past the total computes at global step 24 (a lone
  // prefetching worker's gradients are one update stale).
  job_->FailPushesFrom(24, /*count=*/1);
  std::string initial;
  ASSERT_NO_FATAL_FAILURE(
      SaveFirstCheckpoint("fresh_memory_after_restore", ASYNC, initial));

  Trainer trainer(options_, parts_);
  absl::Status result;
  std::thread run([&] { result = trainer.Run(); });
  JobCoordinator& chief = *job_->coordinator;
  WaitUntilFinished(chief);
  EXPECT_EQ(job_->failed_pushes(), 1);
  EXPECT_EQ(job_->shared_allocations(), 4);  // two sets of each
  ASSERT_NO_FATAL_FAILURE(RestoreAndResume(initial));
  WaitUntilFinished(chief);
  chief.Succeed();
  run.join();
  ASSERT_OK(result);
  // The set the failed push was sent from, replaced for the second run.
  EXPECT_EQ(job_->shared_allocations(), 5);
  EXPECT_GE(job_->core->Stats().updates_applied(), 2 * 25 * 2 - 2);
}

TEST_F(TrainerTest, AJobThatAlreadySucceededIsNothingToDo) {
  SetUpJob(ASYNC, 60);
  job_->coordinator->Succeed();
  Trainer trainer(options_, parts_);
  EXPECT_OK(trainer.Run());
  EXPECT_EQ(trainer.local_steps(), 0);
}

TEST_F(TrainerTest, AFailedJobEndsTheRunWithItsReason) {
  SetUpJob(ASYNC, 60);
  job_->coordinator->Fail("ps-1 was lost");
  Trainer trainer(options_, parts_);
  EXPECT_THAT(trainer.Run(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("ps-1 was lost")));
}

// Every server call fails (the servers were never configured) and the
// chief keeps training: the worker retries until the recovery timeout,
// then gives up with the servers' error.
// A model that has diverged (weights near the float limit, so every
// logit overflows, every gradient is NaN and every push is refused) ends the
// run promptly with the cause, in both modes, instead of retrying until the
// recovery timeout.
TEST_F(TrainerTest, ADivergedModelEndsTheRunWithTheCause) {
  for (UpdateMode mode : {ASYNC, SYNC}) {
    SetUpJob(mode, 100000);
    std::vector<std::vector<float>> huge;
    std::vector<ParameterClient::Const> values;
    for (const LogicalVariable& v : job_->variables) {
      huge.emplace_back(v.num_elements(), 3e38f);
    }
    for (size_t i = 0; i < huge.size(); ++i) {
      values.emplace_back(job_->variables[i].name, huge[i]);
    }
    ASSERT_OK(job_->client->Assign(values)->Wait());
    options_.recovery.recovery_timeout = absl::Hours(1);
    options_.max_rejected_pushes = 5;
    Trainer trainer(options_, parts_);
    EXPECT_THAT(trainer.Run(),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         AllOf(HasSubstr("refused this worker's last 5 "
                                         "gradients"),
                               HasSubstr("is not finite"))))
        << UpdateMode_Name(mode);
    EXPECT_GE(job_->core->Stats().nonfinite_gradients_rejected(), 5);
    EXPECT_EQ(job_->core->Stats().updates_applied(), 0);
  }
}

// Every variable's values, pulled from the servers.
std::vector<std::vector<float>> PullAll(const InProcessJob& job) {
  std::vector<std::vector<float>> values;
  std::vector<ParameterClient::Mutable> targets;
  values.reserve(job.variables.size());
  for (const LogicalVariable& v : job.variables) {
    values.emplace_back(v.num_elements());
  }
  for (size_t i = 0; i < values.size(); ++i) {
    targets.emplace_back(job.variables[i].name, absl::MakeSpan(values[i]));
  }
  EXPECT_OK(job.client->Pull(targets)->Wait());
  return values;
}

// training.gradient_clipping: with SGD at rate 0.5, every update of a
// variable moves it by 0.5 x its clipped gradient, so 20 steps move each
// variable by at most 20 x 0.5 x the norm bound (per variable, or all of
// them together for the global norm; SYNC streams per-variable clipping
// and holds a global one until backward ends). Unclipped, the same steps
// move them far more.
TEST_F(TrainerTest, ClippedGradientsBoundEachUpdate) {
  constexpr int kSteps = 20;
  constexpr double kBound = 1e-3;
  for (UpdateMode mode : {ASYNC, SYNC}) {
    for (const char* kind : {"none", "clip_norm", "global_clip_norm"}) {
      SCOPED_TRACE(absl::StrCat(UpdateMode_Name(mode), " ", kind));
      SetUpJob(mode, kSteps);
      GradientClipping& clipping = *options_.spec.mutable_config()
                                        ->mutable_training()
                                        ->mutable_gradient_clipping();
      if (std::string(kind) == "clip_norm") clipping.set_clip_norm(kBound);
      if (std::string(kind) == "global_clip_norm") {
        clipping.set_global_clip_norm(kBound);
      }
      const std::vector<std::vector<float>> before = PullAll(*job_);
      Trainer trainer(options_, parts_);
      ASSERT_OK(trainer.Run());
      const std::vector<std::vector<float>> after = PullAll(*job_);
      double all = 0;
      double largest = 0;
      for (size_t v = 0; v < before.size(); ++v) {
        double squares = 0;
        for (size_t i = 0; i < before[v].size(); ++i) {
          const double d = after[v][i] - before[v][i];
          squares += d * d;
        }
        all += squares;
        largest = std::max(largest, std::sqrt(squares));
      }
      // Steps past the total (a push in flight) are bounded the same way.
      const int64_t updates = job_->core->Stats().updates_applied() /
                              static_cast<int64_t>(before.size());
      const double bound =
          1.0001 * std::max<int64_t>(kSteps, updates) * 0.5 * kBound;
      if (std::string(kind) == "none") {
        EXPECT_GT(largest, 10 * bound) << "the data moves it far unclipped";
      } else if (std::string(kind) == "clip_norm") {
        EXPECT_LE(largest, bound);
        EXPECT_GT(largest, 0);
      } else {
        EXPECT_LE(std::sqrt(all), bound);
        EXPECT_GT(all, 0);
      }
    }
  }
}

// A chief that answers a finished worker's reports as a long-polling one
// does, on a simulated clock: the first report is held 3 s, the second is
// answered at once (as by a chief that holds nothing), the third is held
// 0.4 s, and the fourth hears that the job succeeded. It records when (on
// the clock) each report came and the wait it asked for.
class HoldingChief final : public testing::ForwardingCoordinator {
 public:
  HoldingChief(CoordinatorClient* inner, FakeClock* clock)
      : ForwardingCoordinator(inner), clock_(clock) {}

  absl::StatusOr<StatusResponse> ReportProgress(
      const ProgressReport& report, absl::Duration timeout) override {
    if (!report.finished()) {
      return ForwardingCoordinator::ReportProgress(report, timeout);
    }
    asked_at.push_back(clock_->Now());
    waits_asked.push_back(report.wait_for_news_ms());
    ProgressReport at_once = report;
    at_once.clear_wait_for_news_ms();
    absl::StatusOr<StatusResponse> status =
        ForwardingCoordinator::ReportProgress(at_once, timeout);
    switch (asked_at.size()) {
      case 1:
        clock_->Advance(absl::Seconds(3));
        break;
      case 3:
        clock_->Advance(absl::Milliseconds(400));
        break;
      case 4:
        if (status.ok()) status->set_state(SUCCEEDED);
        break;
    }
    return status;
  }

  // The trainer's thread only (the keep-alive below sends none).
  std::vector<absl::Time> asked_at;
  std::vector<int64_t> waits_asked;

 private:
  FakeClock* const clock_;
};

// After its last step a worker asks the chief to hold its answer until the
// job has news, and asks again as soon as a held answer comes: it waits
// only what remains of the heartbeat interval, and a whole interval only
// after an answer that came at once.
TEST_F(TrainerTest, AfterAHeldAnswerTheNextReportGoesOutAtOnce) {
  FakeClock clock;
  clock.SetAutoAdvance(true);  // the trainer's waits move it
  SetUpJob(ASYNC, 30, /*configure_servers=*/true, &clock);
  StopChief();  // the job ends when HoldingChief says so
  HoldingChief chief(parts_.coordinator, &clock);
  parts_.coordinator = &chief;
  // A keep-alive of its own, on the real clock, silent after its first
  // report: the simulated clock moves only with the trainer.
  KeepAlive keep_alive(job_->chief.get(), PreparingReport(0, 0),
                       absl::Hours(1));
  parts_.keep_alive = &keep_alive;
  options_.heartbeat_interval = absl::Seconds(1);
  Trainer trainer(options_, parts_);
  ASSERT_OK(trainer.Run());
  ASSERT_EQ(chief.asked_at.size(), 4u);
  for (int64_t wait : chief.waits_asked) EXPECT_GT(wait, 0);
  const std::vector<absl::Time>& at = chief.asked_at;
  EXPECT_EQ(at[1] - at[0], absl::Seconds(3)) << "slept after a held answer";
  EXPECT_EQ(at[2] - at[1], absl::Seconds(1)) << "an answer at once";
  EXPECT_EQ(at[3] - at[2], absl::Seconds(1)) << "the rest of the interval";
}

// On a simulated clock, with the production recovery policy: the worker
// rides the failures out for the whole five-minute window, in
// milliseconds of real time.
TEST_F(TrainerTest, FailingServersOutlastingTheRecoveryTimeoutEndTheRun) {
  FakeClock clock;
  clock.SetAutoAdvance(true);
  SetUpJob(ASYNC, 60, /*configure_servers=*/false, &clock);
  options_.recovery = RecoveryPolicy();
  const absl::Time start = clock.Now();
  Trainer trainer(options_, parts_);
  EXPECT_THAT(trainer.Run(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_GE(clock.Now() - start, absl::Minutes(5));
  EXPECT_EQ(trainer.local_steps(), 0);
  EXPECT_TRUE(job_->coordinator->LastReports()[0].paused());
}

// A chief that exits while the servers still answer: the worker trains on
// (a restarting chief would find the servers' state) for the recovery
// timeout, then stops with the chief's silence as the cause, instead of
// training until the servers give up on the chief (their 15 minutes). The
// job's total is out of reach, so only the chief's silence ends the run.
TEST_F(TrainerTest, AWorkerStopsTrainingWhenTheChiefStaysSilent) {
  SetUpJob(ASYNC, int64_t{1} << 40);
  GoneChief chief(job_->chief.get());
  parts_.coordinator = &chief;
  options_.recovery.recovery_timeout = absl::Milliseconds(200);
  Trainer trainer(options_, parts_);
  EXPECT_THAT(trainer.Run(),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("the chief has not answered for"),
                             HasSubstr("while this worker trained"),
                             HasSubstr("chief-0: Connection refused"))));
  EXPECT_GT(trainer.local_steps(), 0);
}

// A chief that stopped answering must not hold the training thread for a
// whole deadline at every report: after the first miss, it is asked at
// most every 10 s, for a second (the keep-alive reports meanwhile).
TEST_F(TrainerTest, AStoppedChiefDoesNotHoldEveryStep) {
  SetUpJob(ASYNC, int64_t{1} << 40);
  StoppedChief chief(job_->chief.get());
  parts_.coordinator = &chief;
  options_.recovery.recovery_timeout = absl::Milliseconds(300);
  Trainer trainer(options_, parts_);
  EXPECT_THAT(trainer.Run(), StatusIs(absl::StatusCode::kUnavailable,
                                      HasSubstr("chief-0: Deadline Exceeded")));
  // The training thread's reports ask for 10 s (the keep-alive's, 5 s):
  // the one as it starts stepping and the first heartbeat, then none
  // within 10 s of that miss, however many steps ran.
  const std::vector<absl::Duration> timeouts = chief.timeouts();
  EXPECT_EQ(absl::c_count(timeouts, absl::Seconds(10)), 2);
  EXPECT_EQ(absl::c_count(timeouts, absl::Seconds(1)), 0);
  EXPECT_GT(trainer.local_steps(), 10);
}

// A worker that missed the job's end (stopped while the chief ended the
// job and exited) finds nobody answering: it exits once the chief has been
// silent for chief_silence_with_servers_down and no server answers its
// Stats, not after the whole recovery timeout. A server that answers (the
// chief restarting) keeps it waiting. On a simulated clock, with the
// production recovery policy.
TEST_F(TrainerTest, AWorkerThatFindsNobodyAnsweringExitsSoon) {
  for (const bool stats_answer : {false, true}) {
    SCOPED_TRACE(stats_answer ? "a server answers" : "every server is gone");
    FakeClock clock;
    clock.SetAutoAdvance(true);
    SetUpJob(ASYNC, 60, /*configure_servers=*/true, &clock);
    std::vector<std::unique_ptr<PsShard>> shards;
    // Data calls refused as by a server that is gone; its Stats fail too
    // (gone) or are answered (up, refusing this worker's data calls).
    auto shard = std::make_unique<testing::FailingShard>(
        "ps-0", absl::UnavailableError("ps-0: Connection refused"),
        stats_answer);
    const testing::FailingShard* refusing = shard.get();
    shards.push_back(std::move(shard));
    ASSERT_OK_AND_ASSIGN(Placement placement,
                         PlaceVariables(job_->variables, 1, 1 << 20));
    ParameterClient client(std::move(shards), placement,
                           ParameterClient::Options());
    ASSERT_OK(client.Configure(options_.spec.ps_config()));
    GoneChief chief(job_->chief.get());
    parts_.client = &client;
    parts_.coordinator = &chief;
    options_.recovery = RecoveryPolicy();
    const absl::Time start = clock.Now();
    Trainer trainer(options_, parts_);
    const absl::Status result = trainer.Run();
    const absl::Duration took = clock.Now() - start;
    EXPECT_GE(refusing->stats_calls(), 1);
    if (stats_answer) {
      EXPECT_THAT(result, StatusIs(absl::StatusCode::kUnavailable,
                                   Not(HasSubstr("nor any parameter server"))));
      EXPECT_GE(took, options_.recovery.recovery_timeout);
    } else {
      EXPECT_THAT(result,
                  StatusIs(absl::StatusCode::kUnavailable,
                           AllOf(HasSubstr("ps-0: Connection refused"),
                                 HasSubstr("neither the chief"),
                                 HasSubstr("nor any parameter server"))));
      EXPECT_LT(took, options_.recovery.recovery_timeout);
    }
  }
}

}  // namespace
}  // namespace psflow
