// A worker's training loop: pull, compute, push, report.
//
//   async: each push is applied on arrival. The next parameters are
//          pulled either while this step computes (prefetched: the wait
//          hidden, the parameters missing this worker's last update or
//          two) or after this step's push is applied (fresh), as
//          TrainingConfig.parameter_prefetch and, for AUTO, the wait that
//          a fresh pull exposes decide (worker/prefetch_policy.h).
//   sync:  pull the current step's parameters (the server answers once the
//          step is applied), compute, push with that step's version; a
//          push that arrives after the step closed (a backup's) is dropped
//          by the server and counted here. The push overlaps backward: the
//          model reports each gradient as it is final
//          (ExampleBatch::gradient_ready) and groups of about
//          TrainerOptions::sync_group_bytes go out at once
//          (worker/sync_groups.h); the next step's pull goes out in groups
//          in forward order, the first layer's first.
//   bounded: as async, but every pull and push carries this worker's own
//          step (its clock), and a server answers the pull for step c once
//          no live worker is more than max_staleness steps behind it. The
//          first pull, and the first after a failure or a pause, joins:
//          the servers answer the clock to go on from.
//
// A model with embedding tables (model/model.h ModelTable) also pulls, each
// step, the rows of its batch's distinct ids (a training pull; SYNC: at the
// step's version) and pushes their gradients after the dense push
// (client/batch_rows.h). SYNC waits for both. Otherwise, as for the dense
// parameters, the next batch is taken from the stream while the current
// one computes and its rows pull travels meanwhile (two batch buffers;
// BOUNDED: for the worker's next clock, so the servers' bound holds for
// rows as for dense pulls), and the rows push travels while the next step
// computes, awaited with the dense push that used the same gradient slot.
// Rows the two batches share are thus read one step staler: before the
// current batch's gradient for them is applied (the servers' staleness
// histogram counts it).
//
// While the loop blocks (a pull waiting for a sync step or for a slower
// worker), a keep-alive (worker/keep_alive.h) resends the latest heartbeat
// about once an interval, so the chief never takes a waiting worker for a
// lost one.
//
// The loop ends when the parameter servers' global step (the version a
// pull returns) reaches the job's total, so every worker stops at the same
// point without asking the chief each step. A heartbeat with progress goes
// to the chief about once a second; the chief's answer can end the loop
// (the job failed elsewhere) or pause it (a restore).
//
// When a parameter-server call fails, or the chief pauses the job, the
// trainer waits for the chief to recover the job (RecoveryPolicy below),
// then pulls afresh.
//
// After its last step a worker stays in the job until the chief ends it
// (SUCCEEDED or FAILED): a parameter server or the chief lost during the
// final checkpoint is recovered by restoring an earlier checkpoint, and the
// steps since it are trained again by these same workers. So Run() returns
// with the job's outcome, not with the worker's last step. Its finished
// reports are long polls: the chief holds each answer until the job has
// news (it ended, paused, restored) or a few seconds passed, so the worker
// hears the end at once rather than up to a heartbeat later.
//
// A Trainer is run by one thread; everything in TrainerParts must outlive
// Run(). The pieces come in from outside (worker/training_job.h builds
// them for a real worker), so tests drive it with in-process twins.
#ifndef PSFLOW_WORKER_TRAINER_H_
#define PSFLOW_WORKER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/batch_rows.h"
#include "client/coordinator_client.h"
#include "client/ps_client.h"
#include "common/background_queue.h"
#include "common/clock.h"
#include "common/metrics/event_file_writer.h"
#include "common/mutex.h"
#include "data/batch_stream.h"
#include "model/model.h"
#include "proto/coordinator.pb.h"
#include "worker/gradient_clipping.h"
#include "worker/keep_alive.h"
#include "worker/prefetch_policy.h"
#include "worker/slowdown.h"
#include "worker/sync_groups.h"
#include "worker/worker_metrics.h"

namespace psflow {

// How a trainer rides out failures and pauses.
struct RecoveryPolicy {
  // How long failing parameter-server calls or a pause are ridden out,
  // waiting for the chief to restore the model and resume, before the
  // worker gives up with the error.
  absl::Duration recovery_timeout = absl::Minutes(5);
  // How long a waiting worker waits for a chief that does not answer
  // when no parameter server answers either (the job ended, or the
  // cluster is gone); each server is asked for its Stats, bounded by
  // server_probe_timeout.
  absl::Duration chief_silence_with_servers_down = absl::Seconds(10);
  absl::Duration server_probe_timeout = absl::Seconds(1);
  // After a failed server call, how long the chief gets to notice the lost
  // server (and pause the job) before the worker simply retries.
  absl::Duration chief_notice_time = absl::Seconds(3);
  // How often a waiting worker asks the chief.
  absl::Duration poll_interval = absl::Milliseconds(200);
};

struct TrainerOptions {
  int worker_index = 0;
  // Random per process start (the chief tells restarts from retries).
  uint64_t incarnation = 0;
  JobSpec spec;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // A report brought forward by a save's step (StatusResponse.
  // report_every_steps) waits until this long after the previous report,
  // so a tiny save period does not make every step a report.
  absl::Duration early_report_spacing = absl::Milliseconds(50);
  RecoveryPolicy recovery;
  // A deliberate straggler for experiments (the worker's --slowdown
  // flags); full speed by default.
  Slowdown slowdown;
  // The servers refusing this many of the worker's gradients in a row
  // (INVALID_ARGUMENT: NaN or Inf, a wrong size) ends the run with that
  // cause: retrying the same computation cannot fix them, and a diverged
  // model would otherwise retry until the recovery timeout.
  int max_rejected_pushes = 20;
  // SYNC: gradients ready during backward go out once at least this many
  // bytes are ready (the rest when backward ends), and the next step's
  // pull is split into groups of about this size, in forward order. Fewer
  // bytes: more overlap, more RPCs. A slowed worker (`slowdown`) pushes
  // everything after its delay, as a straggler would. The job config's
  // training.sync_group_bytes sets it (0 there: the int64 maximum).
  int64_t sync_group_bytes = 256 << 10;
  // Not SYNC, models with tables: start the step's calls on a background
  // thread while it computes (the next batch's rows, the pushes, the dense
  // prefetch); off, the training thread starts them between steps. The
  // worker's --background_calls (auto: on where the process may use at
  // least 4 cores).
  bool background_calls = true;
  // Async (not bounded), calls started on the training thread: a step's
  // push also carries the pull it would otherwise start next (the
  // prefetch of the step after next, or a fresh step's parameters), one
  // call instead of two, the same values at the same staleness
  // (ParameterClient::PushThenPull). The worker's --push_then_pull.
  bool push_then_pull = true;
};

// What a trainer works with; nothing is owned.
struct TrainerParts {
  Device* device = nullptr;                // the model's
  Model* model = nullptr;                  // for the job's batch size
  std::vector<LogicalVariable> variables;  // the model's, in order
  std::vector<ModelTable> tables;          // the model's, if any
  ParameterClient* client = nullptr;       // configured for the job
  CoordinatorClient* coordinator = nullptr;
  BatchStream* batches = nullptr;
  EventFileWriter* metrics = nullptr;           // optional
  const WorkerMetrics* live_metrics = nullptr;  // optional (Prometheus)
  // Optional: one already running since the worker registered; without
  // it, Run() keeps one of its own while it trains.
  KeepAlive* keep_alive = nullptr;
  // Recovery windows, heartbeats and the step timings are measured on it.
  Clock* clock = &RealClock();
};

class Trainer {
 public:
  Trainer(TrainerOptions options, TrainerParts parts);

  // Trains until the job's total global steps, then waits for the job's
  // end: OK when it succeeded, Aborted when it failed, the error when a
  // failure outlasts the recovery policy (or the chief falls silent for
  // good after the last step).
  absl::Status Run();

  // Counters after Run().
  int64_t local_steps() const { return local_steps_; }

  // The randomness of this worker's next step (dropout masks): a function
  // of the job's seed, the worker and its step count, so a run repeats.
  uint64_t StepSeed(uint64_t job_seed) const;
  int64_t stale_pushes() const { return stale_; }

  // Where this worker's training time went, summed over its steps:
  // computing gradients, waiting for parameters, waiting for the previous
  // push (the rest is reading batches, heartbeats and recovery). Models
  // with tables, part of the rest: finding a batch's distinct ids and
  // starting its rows pull and push (routing ids, summing gradients), or
  // waiting for the background thread that does it. Not SYNC,
  // `background`: the time the background thread spent starting calls
  // while the training thread went on (not part of a step's time).
  struct PhaseTotals {
    absl::Duration compute, pull_wait, push_wait, rows_setup, background;
  };
  const PhaseTotals& phase_totals() const { return phases_; }

 private:
  // Host buffers for every variable, in model order.
  struct HostTensors {
    std::vector<std::shared_ptr<HostBuffer>> buffers;  // own `values`
    std::vector<absl::Span<float>> values;
    // Those of `buffers` that a server shares (calls copy nothing).
    std::vector<std::shared_ptr<SharedBuffer>> shared;
  };
  // Progress since the last heartbeat.
  struct Window {
    double loss = 0;
    int64_t correct = 0, examples = 0;
    absl::Time start;
  };

  // What the rest of a step does after one of its parts.
  enum class Next {
    kGoOn,     // the step goes on (after its last part: the next step)
    kRestart,  // drop the step and pull the model afresh (Restart)
    kStop,     // training ends: the job's total step, or the job is over
  };
  // Train()'s state from one step to the next.
  struct TrainLoop {
    int log_every = 1;
    absl::Time next_heartbeat;
    absl::Time last_report = absl::InfinitePast();
  };

  // The training loop (Run adds the keep-alive and the final report).
  absl::Status Train();
  // One step, its parts in order; any of them may cut it short.
  absl::StatusOr<Next> TrainOneStep(TrainLoop& loop);
  // Waits for pull_ (this step's parameters): sets version_ and, after a
  // join, clock_; kStop once the job's total step is reached.
  absl::StatusOr<Next> AwaitParameters();
  // Loads the pulled parameters into the model; not SYNC, starts the pull
  // of the next step's into the other buffer.
  absl::Status LoadParametersAndPrefetch();
  // Not SYNC: waits for the push that last used this step's gradient
  // buffer.
  absl::StatusOr<Next> AwaitEarlierPush();
  // Models with tables: the staged batch, taken from the stream (its ids
  // prepared) unless prefetched; null at the stream's end.
  absl::StatusOr<const Batch*> StageBatch();
  // Models with tables: waits for the staged batch's rows (pulling them
  // now unless prefetched); not SYNC, then takes the next batch and starts
  // its rows pull.
  absl::StatusOr<Next> PullRows();
  // Not SYNC: posts PrefetchRows for the next batch (staged_[1 -
  // staged_current_]) to the background thread.
  void PostPrefetchRows();
  // On the background thread: takes the batch into staged_[index], numbers
  // its ids and starts its rows pull (BOUNDED: for `clock`).
  absl::Status PrefetchRows(int index, std::optional<WorkerClock> clock);
  // Waits for the posted PrefetchRows (counted as rows setup): its status.
  absl::Status AwaitPrefetchRows();
  // Runs `start` (which starts calls) on the background thread and answers
  // its ticket; without one (background_calls off) runs it now, adding its
  // time to the rows setup when `rows_setup`, and answers kNothing.
  uint64_t StartCalls(std::function<void()> start, bool rows_setup);
  // Waits for everything posted to the background thread (a restart, a
  // recovery, the end of training): the handles it set are in place.
  void SettleBackground();
  // The staged batch is done with (computed, or dropped by a failure).
  void ReleaseBatch();
  // Drops every rows pull in flight (their rows are pulled again).
  void DropRowPulls();
  // Adds the time since `start` to phases_.rows_setup.
  void AddRowsSetup(absl::Time start);
  // The batch's gradients into grads_[grad_slot_], then the slowdown.
  absl::StatusOr<BatchStats> ComputeGradients(const Batch& batch);
  // SYNC: pushes what backward did not (sync_push_), waits for all of the
  // step's pushes and counts the step once if any arrived after it closed;
  // otherwise the push travels while the next step computes.
  absl::StatusOr<Next> PushGradients();
  // push_then_pull: the push, carrying the pull the next step would start
  // (its prefetch, or a fresh step's parameters).
  absl::StatusOr<Next> PushThenPull();
  // Ends and forgets a pull a push carried (a restart, a recovery, the
  // end of training).
  void DropFusedPull();
  // Models with tables: pushes the rows' gradients (SYNC: and waits).
  absl::StatusOr<Next> PushRows();
  // Not SYNC: waits for the push that last used grad slot `slot` (dense,
  // then rows; started by the background thread), counting push wait;
  // kGoOn, or what its error means.
  absl::StatusOr<Next> AwaitPushes(int slot);
  // The heartbeat, once an interval, and at once when the parameters reach
  // a multiple of the chief's report_every_steps (a save due there): a
  // pause or a
  // restore by the chief is waited out (Recover), then the step restarts.
  absl::StatusOr<Next> HeartbeatIfDue(TrainLoop& loop);
  // Notes the chief's StatusResponse.report_every_steps.
  void ReportEvery(int64_t steps);
  // SYNC: pulls the next step's parameters. Otherwise takes the prefetch,
  // or, after a step that did not prefetch, waits for every push in
  // flight and pulls the parameters they made.
  absl::StatusOr<Next> PullNextStep();
  // A failed server call, after OnFailure: kRestart, or kStop when the
  // job ended meanwhile.
  absl::StatusOr<Next> AfterFailure(const absl::Status& cause);
  // A push that failed: refused gradients (OnRejected) or AfterFailure.
  absl::StatusOr<Next> AfterPushError(const absl::Status& pushed);
  // Adds the time since `start` to the `phase` total, and observes it into
  // the live metrics' `cell` when they are on.
  void Observe(absl::Duration PhaseTotals::*phase,
               HistogramCell* WorkerMetrics::*cell, absl::Time start);
  // Not SYNC: how often the next parameters were prefetched, and why, for
  // the finished line.
  std::string PrefetchSummary() const;
  // Run() until it returns, with its calls possibly still in flight.
  absl::Status RunUntilDone();
  absl::Status AllocateBuffers();
  // One set of buffers for every variable: where the device computes on
  // host memory, in memory the servers share (ParameterClient::
  // AllocateShared), so pulls and pushes copy nothing on this side; else
  // the device's host memory.
  absl::Status AllocateTensors(HostTensors& t);
  // Buffers a call gave up on (a server may still use them) are replaced
  // by fresh ones, and a set that got ordinary memory where the first got
  // shared memory asks again; for Restart, once its calls ended.
  absl::Status ReplaceRetiredBuffers();
  std::vector<ParameterClient::Mutable> Targets(const HostTensors& t) const;
  std::vector<ParameterClient::Const> Sources(const HostTensors& t) const;
  // Tells the chief this worker starts stepping, and whether the job ended
  // before it started (OK: nothing to do); waits out a pause in progress.
  absl::StatusOr<bool> JobAlreadyOver();
  ProgressReport BaseReport() const;
  // `wait_for_news`: the chief may hold the answer that long while the job
  // has nothing new for this worker (finished reports only).
  // `deadline`: zero for the usual one.
  absl::StatusOr<StatusResponse> Heartbeat(
      bool finished, absl::Duration wait_for_news = absl::ZeroDuration(),
      absl::Duration deadline = absl::ZeroDuration());
  // After the last step: reports `finished` until the chief ends the job,
  // each report a long poll the chief answers once the job has news.
  // True when the chief restored the model to an earlier step meanwhile
  // (train again), false when the job succeeded; Aborted when it failed.
  absl::StatusOr<bool> AwaitJobEnd();
  // Waits out a pause, or failing server calls (`cause`), until the chief
  // trains again: OK means "pull again and go on" (or job_over_).
  absl::Status Recover(const absl::Status& cause);
  // Recover's round: tells the chief this worker waits paused; the
  // chief's answer, or the job's end the keep-alive heard before the chief
  // exited.
  absl::StatusOr<StatusResponse> ReportPaused();
  // What the chief's answer means to a waiting worker, `waited` into the
  // wait: the result Recover returns, or nullopt to ask again.
  std::optional<absl::Status> ResumeOrWait(const StatusResponse& status,
                                           const absl::Status& cause,
                                           absl::Duration waited,
                                           bool& announced);
  // A failed server call: OK to restart the step, else the error.
  absl::Status OnFailure(const absl::Status& cause);
  // A gradient the servers refused: OK to go on with the next batch, else
  // (max_rejected_pushes in a row) the error that ends the run.
  absl::Status OnRejected(const absl::Status& cause);
  // Drops the step in progress and pulls the model afresh.
  absl::Status Restart();
  // A step done: counters, metrics, the progress line every `log_every`.
  void RecordStep(const Batch& batch, const BatchStats& stats, int log_every);
  // The heartbeat from inside the loop: true when the chief paused the job
  // or restored the model (Recover, then pull again) or finished training
  // (job_over_ set: stop); Aborted when it failed the job. A heartbeat that
  // fails is logged and training goes on.
  absl::StatusOr<bool> CheckInWithTheChief();
  // The "finished:" line: steps, examples, and where the time went.
  void LogFinished(absl::Duration elapsed) const;
  // Records a report just sent (the keep-alive resends it when the loop
  // sends nothing for an interval).
  void Remember(const ProgressReport& report);
  // Pulls `t` for this worker's step `clock` (bounded mode: with the
  // worker clock, joining when `join`), waiting for min_version (sync).
  std::shared_ptr<PsHandle> PullFor(const HostTensors& t, int64_t min_version,
                                    int64_t clock, bool join);
  // The call PullFor makes, touching no member (the background thread
  // starts prefetches with it).
  std::shared_ptr<PsHandle> StartPull(
      std::vector<ParameterClient::Mutable> targets, int64_t min_version,
      int64_t clock, bool join) const;
  // SYNC (trainer_sync.cc): pulls `t` for min_version in pull_groups_, one
  // pull per group.
  PsHandles PullInForwardGroups(const HostTensors& t, int64_t min_version);
  // SYNC: starts the step's push into sync_push_, `example` telling it each
  // gradient backward finishes.
  void StartSyncPush(ExampleBatch& example);
  // SYNC: pushes the rest, waits for every push of the step, and counts
  // the step once if any arrived after the step closed.
  absl::StatusOr<Next> FinishSyncPush();
  // BOUNDED: the WorkerClock of a rows pull for step `clock`; else none.
  std::optional<WorkerClock> RowsClock(int64_t clock) const;

  const TrainerOptions options_;
  const TrainerParts parts_;
  const bool sync_;
  const bool bounded_;

  HostTensors params_[2], grads_[2];
  // Models with tables: a batch and its rows, double-buffered like
  // params_ (SYNC uses staged_[0] only).
  struct StagedBatch {
    std::optional<Batch> batch;  // its ids prepared in `rows`
    std::unique_ptr<BatchRows> rows;
    std::shared_ptr<RowsHandle> pull;  // in flight, or not waited yet
    bool pulled = false;               // rows hold the batch's rows
    int64_t version = 0;  // the table version the rows were read at
  };
  bool has_tables_ = false;
  StagedBatch staged_[2];
  int staged_current_ = 0;
  // Async keeps two gradient buffers so that a step's push travels while
  // the next step computes; a buffer is reused only after its push ended.
  // A step's rows push (its gradients copied when it starts) shares the
  // dense push's slot, so at most two of each are in flight.
  // How many variables of a set of tensors the first allocation placed in
  // memory a server shares: what a replaced set should get back.
  size_t shared_per_set_ = 0;
  std::shared_ptr<PsHandle> pushes_[2];
  std::shared_ptr<RowsHandle> row_pushes_[2];
  // This step's parameters (SYNC: in groups, in forward order).
  PsHandles pull_;
  // SYNC: forward's groups of variables for the next step's pull, and the
  // step's pushes as backward finishes the gradients (it reads grads_, so
  // it is declared after them and dropped first).
  std::vector<std::vector<int>> pull_groups_;
  SyncPusher sync_push_;
  // Not SYNC: whether this step prefetched the next one's parameters, and
  // what a step that did not spent, for the policy (reported once the
  // next step's pull arrived).
  PrefetchPolicy prefetch_policy_;
  bool prefetching_ = false;
  // push_then_pull: whether this trainer fuses (see TrainerOptions); the
  // policy's choice for the next step, made as this step's push leaves;
  // the next step's prefetch, already carried by this step's push; and
  // whether pull_ is a fresh step's push-then-pull.
  bool fuse_ = false;
  std::optional<bool> next_prefetch_;
  std::shared_ptr<PsHandle> fused_prefetch_;
  bool fused_fresh_ = false;
  // The push that carries pull_, if one does: its failure is the push's
  // (a rejected gradient counts as one).
  std::shared_ptr<PsHandle> carried_by_;
  std::optional<absl::Duration> fresh_push_wait_;
  absl::Duration last_compute_;
  int64_t prefetched_steps_ = 0;
  int grad_slot_ = 0;
  int current_ = 0;
  int64_t local_steps_ = 0, examples_ = 0, stale_ = 0, version_ = 0;
  // training.gradient_clipping; which of this step's variables were
  // clipped as backward finished them (SYNC's early groups).
  GradientClipper clipper_;
  std::vector<bool> clipped_;
  // The chief's latest StatusResponse.report_every_steps, and the multiple
  // of it the parameters were at when last looked (HeartbeatIfDue).
  int64_t report_every_ = 0, seen_multiple_ = 0;
  bool report_early_ = false;  // a multiple was reached, not yet reported
  // Bounded mode: this worker's clock (steps it pushed, as the servers
  // count them; a join may move it forward), and whether pull_ joins.
  int64_t clock_ = 0;
  bool joining_ = false;
  // Restores by the chief bump the model's generation: after one, what
  // this worker holds is stale and it pulls again.
  int64_t generation_ = 0;
  bool job_over_ = false;
  // Consecutive failed attempts share one recovery deadline.
  absl::Time failing_since_ = absl::InfiniteFuture();
  // When the chief last answered a heartbeat (or the training began, or a
  // recovery ended): a chief silent for the recovery timeout while this
  // worker trains ends the run (CheckInWithTheChief).
  absl::Time chief_answered_at_;
  // While the chief does not answer, the training thread asks it only
  // this often, briefly (CheckInWithTheChief): a stopped chief must not
  // hold every step for a whole deadline.
  absl::Time next_silent_check_in_ = absl::InfinitePast();
  bool chief_silent_ = false;
  std::string chief_silence_cause_;  // the last attempt's error
  // Gradients refused in a row (OnRejected).
  int rejected_in_a_row_ = 0;
  // The latest batch's mean loss: not finite once the model diverged.
  double last_batch_loss_ = 0;
  Window window_;
  PhaseTotals phases_;
  // parts_.keep_alive or Run()'s own.
  KeepAlive* keep_alive_ = nullptr;
  // Of the latest window that saw examples.
  double last_loss_ = 0;
  double last_accuracy_ = 0;

  // Not SYNC, models with tables, background_calls: the thread that
  // starts calls while a step computes (common/background_queue.h): the
  // next batch's rows (ids numbered, rows pull started), a step's rows
  // push, (ASYNC) its dense push and the dense prefetch, in the order
  // posted (a prefetch does not overtake the pushes before it). BOUNDED
  // starts the dense push inline: its worker clock must reach the servers
  // before the next step's pull for clock + 1. The closures write
  // staged_[i], pushes_[slot], row_pushes_[slot] and pull_; the training
  // thread reads those only after waiting for the ticket that set them.
  // Declared last: destroyed (running what is queued) before what it uses.
  std::unique_ptr<BackgroundQueue> background_;
  uint64_t prefetch_ticket_ = BackgroundQueue::kNothing;
  uint64_t pull_ticket_ = BackgroundQueue::kNothing;  // sets pull_
  absl::Status prefetch_status_;  // PrefetchRows's, read after its ticket
  uint64_t push_tickets_[2] = {BackgroundQueue::kNothing,
                               BackgroundQueue::kNothing};
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_TRAINER_H_
