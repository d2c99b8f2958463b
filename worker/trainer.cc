#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/fault_point.h"
#include "common/logging.h"
#include "common/splitmix64.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

PrefetchPolicy::Choice PrefetchChoice(
    TrainingConfig::ParameterPrefetch prefetch) {
  switch (prefetch) {
    case TrainingConfig::ALWAYS:
      return PrefetchPolicy::Choice::kAlways;
    case TrainingConfig::NEVER:
      return PrefetchPolicy::Choice::kNever;
    default:
      return PrefetchPolicy::Choice::kAuto;
  }
}

// How long a finished worker's report asks the chief to hold its answer
// until the job has news (a long poll; the chief holds at most its own
// JobCoordinator::kMaxHold): half the report's 10 s deadline, so a held
// answer has as long again to arrive on a loaded machine.
constexpr absl::Duration kJobEndWait = absl::Seconds(5);
constexpr absl::Duration kHeartbeatDeadline = absl::Seconds(10);
// While the chief is silent: how often the training thread asks again,
// and how long it waits then (the keep-alive thread reports meanwhile).
constexpr absl::Duration kSilentChiefRetry = absl::Seconds(10);
constexpr absl::Duration kSilentChiefDeadline = absl::Seconds(1);

}  // namespace

uint64_t Trainer::StepSeed(uint64_t job_seed) const {
  uint64_t state = job_seed ^
                   (0x632be59bd9b4e019ull *
                    static_cast<uint64_t>(options_.worker_index + 1)) ^
                   static_cast<uint64_t>(local_steps_);
  return SplitMix64(state);
}

Trainer::Trainer(TrainerOptions options, TrainerParts parts)
    : options_(std::move(options)),
      parts_(std::move(parts)),
      sync_(options_.spec.config().training().mode() == SYNC),
      bounded_(options_.spec.config().training().mode() == BOUNDED),
      pull_groups_(ForwardGroups(parts_.variables, options_.sync_group_bytes)),
      sync_push_(parts_.client, parts_.variables, options_.sync_group_bytes),
      prefetch_policy_(PrefetchChoice(
          options_.spec.config().training().parameter_prefetch())),
      clipper_(options_.spec.config().training().gradient_clipping()) {
  window_.start = parts_.clock->Now();
  // Only for models with tables: without rows to prepare, the dense calls
  // moved to the thread bought the MLP no steady speed and cost it about
  // half a point of accuracy after 3 epochs (bench/RESULTS.md, "Calls
  // started off the training thread"); they start inline, in step order.
  if (!sync_ && options_.background_calls && !parts_.tables.empty()) {
    background_ = std::make_unique<BackgroundQueue>(parts_.clock);
  }
  // Bounded pushes and pulls carry worker clocks, and the background
  // thread starts its calls in an order of its own: both keep two calls.
  fuse_ =
      !sync_ && !bounded_ && background_ == nullptr && options_.push_then_pull;
  if (!parts_.tables.empty()) {
    has_tables_ = true;
    for (StagedBatch& staged : staged_) {
      staged.rows = std::make_unique<BatchRows>(parts_.tables);
    }
  }
}

namespace {

// Memory a server shares, as the host buffer the trainer's tensors use.
class SharedHostBuffer final : public HostBuffer {
 public:
  explicit SharedHostBuffer(std::shared_ptr<SharedBuffer> shared)
      : shared_(std::move(shared)) {}
  absl::Span<float> span() override { return shared_->span(); }

 private:
  const std::shared_ptr<SharedBuffer> shared_;
};

}  // namespace

absl::Status Trainer::AllocateBuffers() {
  for (HostTensors* t : {&params_[0], &params_[1], &grads_[0], &grads_[1]}) {
    RETURN_IF_ERROR(AllocateTensors(*t));
  }
  shared_per_set_ = params_[0].shared.size();
  if (parts_.device->computes_on_host_memory()) {
    LOG(INFO) << shared_per_set_ << " of " << parts_.variables.size()
              << " variables' parameters and gradients are in memory their "
                 "servers share"
              << (shared_per_set_ == parts_.variables.size()
                      ? " (pulls and pushes copy nothing in this worker)"
                      : "; the others are copied (a server on another host, "
                        "--shared_memory=false, or a variable split over "
                        "servers)");
  }
  return absl::OkStatus();
}

absl::Status Trainer::AllocateTensors(HostTensors& t) {
  t = HostTensors();
  // In place where the model reads and writes host memory (the CPU
  // backend): copying the gradients into the region and the parameters
  // out cost the default job on a 2-core host about a tenth of its wall
  // time (bench/RESULTS.md, "Tensors in shared memory"). A device that copies
  // anyway (CUDA) keeps its page-locked memory, whose uploads and
  // downloads run asynchronously.
  std::vector<std::shared_ptr<SharedBuffer>> shared(parts_.variables.size());
  if (parts_.device->computes_on_host_memory()) {
    std::vector<std::string> names;
    for (const LogicalVariable& v : parts_.variables) names.push_back(v.name);
    shared = parts_.client->AllocateShared(names);
  }
  for (size_t i = 0; i < parts_.variables.size(); ++i) {
    std::shared_ptr<HostBuffer> buffer;
    if (i < shared.size() && shared[i] != nullptr) {
      buffer = std::make_shared<SharedHostBuffer>(shared[i]);
      t.shared.push_back(shared[i]);
    } else {
      ASSIGN_OR_RETURN(buffer, parts_.device->AllocateHost(
                                   parts_.variables[i].num_elements()));
    }
    t.values.push_back(buffer->span());
    t.buffers.push_back(std::move(buffer));
  }
  return absl::OkStatus();
}

absl::Status Trainer::ReplaceRetiredBuffers() {
  for (HostTensors* t : {&params_[0], &params_[1], &grads_[0], &grads_[1]}) {
    bool retired = false;
    for (const auto& shared : t->shared) retired = retired || shared->retired();
    // A set an earlier replacement had to place in ordinary memory (the
    // server's fresh region was still being offered) is tried again, or it
    // would copy on every call for the rest of the job.
    const bool copying = t->shared.size() < shared_per_set_;
    if (!retired && !copying) continue;
    // A push may still be sending this set of gradients (a restart after a
    // rejected push does not wait for the other slot's push, as a recovery
    // does): its parts in ordinary memory go out without a copy, so the
    // set is freed only once the push let go of it.
    for (int slot = 0; slot < 2; ++slot) {
      if (t == &grads_[slot] && pushes_[slot] != nullptr) {
        (void)pushes_[slot]->Wait();  // its outcome is read as before
      }
    }
    // Its contents go: the step restarts from a fresh pull, and gradients
    // are computed again.
    if (retired) {
      LOG(WARNING) << "moving this worker's tensors to fresh memory: a "
                      "server may still use the old (a call on it ended "
                      "unanswered), or its region was replaced";
    }
    RETURN_IF_ERROR(AllocateTensors(*t));
    if (t->shared.size() < shared_per_set_) {
      LOG(WARNING) << t->shared.size() << " of " << shared_per_set_
                   << " variables of a set of this worker's tensors are in "
                      "memory a server shares (its region is not ready); "
                      "the others are copied until the next restart";
    }
  }
  return absl::OkStatus();
}

std::vector<ParameterClient::Mutable> Trainer::Targets(
    const HostTensors& t) const {
  std::vector<ParameterClient::Mutable> out;
  for (size_t i = 0; i < parts_.variables.size(); ++i) {
    out.emplace_back(parts_.variables[i].name, t.values[i]);
  }
  return out;
}

std::vector<ParameterClient::Const> Trainer::Sources(
    const HostTensors& t) const {
  std::vector<ParameterClient::Const> out;
  for (size_t i = 0; i < parts_.variables.size(); ++i) {
    out.emplace_back(parts_.variables[i].name,
                     absl::MakeConstSpan(t.values[i]));
  }
  return out;
}

ProgressReport Trainer::BaseReport() const {
  ProgressReport report;
  report.set_worker_index(options_.worker_index);
  report.set_incarnation(options_.incarnation);
  report.set_local_steps(local_steps_);
  report.set_examples(examples_);
  report.set_global_step(version_);
  report.set_generation(generation_);
  return report;
}

absl::StatusOr<StatusResponse> Trainer::Heartbeat(bool finished,
                                                  absl::Duration wait_for_news,
                                                  absl::Duration deadline) {
  ProgressReport report = BaseReport();
  const double seconds = std::max(
      1e-9, absl::ToDoubleSeconds(parts_.clock->Now() - window_.start));
  if (window_.examples > 0) {
    last_loss_ = window_.loss / window_.examples;
    last_accuracy_ = static_cast<double>(window_.correct) / window_.examples;
    report.set_examples_per_sec(window_.examples / seconds);
  }
  // A window without a step (heartbeats come faster than steps on a slow
  // or loaded machine) repeats the latest loss and accuracy rather than
  // reporting zeros.
  report.set_loss(last_loss_);
  report.set_accuracy(last_accuracy_);
  report.set_finished(finished);
  if (const WorkerMetrics* live = parts_.live_metrics; live != nullptr) {
    live->loss->Set(report.loss());
    live->accuracy->Set(report.accuracy());
    live->examples_per_second->Set(report.examples_per_sec());
    live->global_step->Set(static_cast<double>(version_));
  }
  if (parts_.metrics != nullptr && window_.examples > 0) {
    absl::Status written;
    for (auto [tag, value] :
         {std::pair{"loss", report.loss()},
          std::pair{"accuracy", report.accuracy()},
          std::pair{"examples_per_sec", report.examples_per_sec()}}) {
      written.Update(parts_.metrics->AddScalar(tag, version_, value));
    }
    written.Update(parts_.metrics->Flush());
    if (!written.ok()) {
      LOG(WARNING) << "metrics not written: " << written.message();
    }
  }
  window_ = Window();
  window_.start = parts_.clock->Now();
  Remember(report);
  // Only this call waits: the keep-alive's resends are answered at once.
  if (wait_for_news > absl::ZeroDuration()) {
    report.set_wait_for_news_ms(absl::ToInt64Milliseconds(wait_for_news));
  }
  return parts_.coordinator->ReportProgress(
      report, deadline > absl::ZeroDuration() ? deadline : kHeartbeatDeadline);
}

void Trainer::Remember(const ProgressReport& report) {
  keep_alive_->Remember(report);
}

absl::StatusOr<bool> Trainer::JobAlreadyOver() {
  // Sent and answered before the first pull: once the chief has it, the
  // chief counts this worker as stepping (it waits for it to pause), and
  // a pause that began earlier is in the answer.
  const ProgressReport report = BaseReport();
  Remember(report);
  absl::StatusOr<StatusResponse> status =
      parts_.coordinator->ReportProgress(report, absl::Seconds(10));
  if (!status.ok()) return false;  // the first heartbeat will tell
  generation_ = status->generation();
  ReportEvery(status->report_every_steps());
  // A worker that starts late (slow data loading) may find the job over.
  if (status->state() == SUCCEEDED || status->state() == FINAL_EVALUATION) {
    LOG(INFO) << "the job has already finished training (global step "
              << status->global_step() << "); nothing to do";
    return true;
  }
  if (status->state() == FAILED) {
    return absl::AbortedError(
        absl::StrCat("the job failed: ", status->message()));
  }
  if (status->state() == PAUSED) {
    RETURN_IF_ERROR(Recover(absl::OkStatus()));
    return job_over_;
  }
  return false;
}

absl::Status Trainer::Recover(const absl::Status& cause) {
  const RecoveryPolicy& policy = options_.recovery;
  SettleBackground();
  for (auto& push : pushes_) {
    if (push != nullptr) (void)push->Wait();  // Stale now either way.
    push = nullptr;
  }
  DropFusedPull();
  if (!cause.ok()) {
    LOG(WARNING) << "parameter server call failed (" << cause.message()
                 << "); waiting for the chief to recover the job";
  }
  const absl::Time start = parts_.clock->Now();
  bool announced = false;
  while (true) {
    absl::StatusOr<StatusResponse> status = ReportPaused();
    const absl::Duration waited = parts_.clock->Now() - start;
    if (!status.ok() && waited > policy.chief_silence_with_servers_down &&
        !parts_.client->AnyServerAnswers(policy.server_probe_timeout)) {
      // Neither the servers nor the chief answer: the job ended while this
      // worker could not hear it (a stopped process), or the cluster is
      // gone. A chief that restarts finds its servers still answering.
      return absl::UnavailableError(absl::StrCat(
          cause.ok() ? "the job is paused" : cause.message(),
          "; neither the chief (", status.status().message(),
          ") nor any parameter server answers: the job ended or the "
          "cluster is gone"));
    }
    if (status.ok()) {
      chief_answered_at_ = parts_.clock->Now();
      if (std::optional<absl::Status> done =
              ResumeOrWait(*status, cause, waited, announced)) {
        return *done;
      }
    }
    if (waited > policy.recovery_timeout) {
      return cause.ok() ? absl::DeadlineExceededError(absl::StrCat(
                              "the job stayed paused for ",
                              absl::FormatDuration(policy.recovery_timeout)))
                        : cause;
    }
    parts_.clock->SleepFor(policy.poll_interval);
  }
}

absl::StatusOr<StatusResponse> Trainer::ReportPaused() {
  ProgressReport report = BaseReport();
  report.set_paused(true);
  Remember(report);
  absl::StatusOr<StatusResponse> status =
      parts_.coordinator->ReportProgress(report, absl::Seconds(5));
  if (!status.ok()) {
    // The keep-alive may have heard the job's end before the chief
    // exited (it cancels the calls that brought us here).
    if (std::optional<StatusResponse> ended = keep_alive_->JobEnded()) {
      return *std::move(ended);
    }
  }
  return status;
}

std::optional<absl::Status> Trainer::ResumeOrWait(const StatusResponse& status,
                                                  const absl::Status& cause,
                                                  absl::Duration waited,
                                                  bool& announced) {
  switch (status.state()) {
    case FAILED:
      return absl::AbortedError(
          absl::StrCat("the chief ended the job: ", status.message()));
    case SUCCEEDED:
    case FINAL_EVALUATION:
      job_over_ = true;
      return absl::OkStatus();
    case PAUSED:
      if (!announced) {
        LOG(INFO) << "paused: " << status.message();
        announced = true;
      }
      return std::nullopt;
    case INITIALIZING:
      // A restarted chief, still restoring the model: what this worker
      // would train now is thrown away by that restore, and its new
      // generation means nothing until the chief trains again.
      if (!announced) {
        LOG(INFO) << "the chief restarted and is restoring the model; "
                     "waiting for it to train again";
        announced = true;
      }
      return std::nullopt;
    default:
      if (status.generation() != generation_) {
        LOG(INFO) << "the chief restored the model (generation "
                  << status.generation() << ", global step "
                  << status.global_step() << "); resuming";
        generation_ = status.generation();
        return absl::OkStatus();
      }
      // Training as before: retry, unless the chief has not yet noticed a
      // server it will restore (give it a few seconds).
      if (cause.ok() || waited > options_.recovery.chief_notice_time) {
        return absl::OkStatus();
      }
      return std::nullopt;
  }
}

absl::Status Trainer::OnRejected(const absl::Status& cause) {
  ++rejected_in_a_row_;
  if (rejected_in_a_row_ >= options_.max_rejected_pushes) {
    const JobConfig& config = options_.spec.config();
    if (!std::isfinite(last_batch_loss_)) {
      // The usual cause: the updates overflowed the model's values.
      return absl::FailedPreconditionError(absl::StrFormat(
          "the updates are not finite: the model diverged (batch loss %g) "
          "and the parameter servers refused this worker's last %d "
          "gradients (%s); the learning rate %g (learning_rate.learning_rate, "
          "optimizer %s) is too large: lower it, or check the data for "
          "extreme values",
          last_batch_loss_, rejected_in_a_row_, cause.message(),
          config.learning_rate().learning_rate(),
          OptimizerConfig::Kind_Name(config.optimizer().kind())));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "the parameter servers refused this worker's last ", rejected_in_a_row_,
        " gradients, so no update can be applied (", cause.message(),
        "); the job stops: lower the learning rate or check the data"));
  }
  if (rejected_in_a_row_ == 1) {
    LOG(WARNING) << "a gradient was refused (" << cause.message()
                 << "); going on with the next batch";
  }
  return absl::OkStatus();
}

absl::Status Trainer::OnFailure(const absl::Status& cause) {
  if (failing_since_ == absl::InfiniteFuture())
    failing_since_ = parts_.clock->Now();
  if (parts_.clock->Now() - failing_since_ >
      options_.recovery.recovery_timeout) {
    return cause;
  }
  return Recover(cause);
}

std::shared_ptr<PsHandle> Trainer::PullFor(const HostTensors& t,
                                           int64_t min_version, int64_t clock,
                                           bool join) {
  if (bounded_) joining_ = join;
  return StartPull(Targets(t), min_version, clock, join);
}

std::shared_ptr<PsHandle> Trainer::StartPull(
    std::vector<ParameterClient::Mutable> targets, int64_t min_version,
    int64_t clock, bool join) const {
  if (!bounded_) return parts_.client->Pull(targets, min_version);
  WorkerClock worker_clock;
  worker_clock.set_worker_index(options_.worker_index);
  worker_clock.set_clock(clock);
  worker_clock.set_join(join);
  return parts_.client->PullForStep(targets, worker_clock);
}

absl::Status Trainer::Restart() {
  SettleBackground();  // a prefetch may be setting pull_
  (void)pull_.Wait();
  DropFusedPull();
  RETURN_IF_ERROR(ReplaceRetiredBuffers());
  // Rows pulled before a failure or a restore are pulled again; SYNC drops
  // the step's batch, as it always did.
  DropRowPulls();
  if (sync_ && has_tables_) ReleaseBatch();
  pull_ = PsHandles(PullFor(params_[current_], 0, clock_, /*join=*/true));
  return absl::OkStatus();
}

absl::Status Trainer::Run() {
  absl::Status result = RunUntilDone();
  SettleBackground();  // what it started is in the handles dropped below
  if (!result.ok()) {
    // An error can leave a pull or push in flight (a prefetch, a pull
    // waiting for a sync step the other workers cannot finish without this
    // one). Their handles wait for them when dropped, since they write and
    // read this trainer's buffers: end them now rather than at their RPC
    // deadline, so the error reaches the chief at once.
    parts_.client->CancelInFlight();
  }
  pull_.Clear();
  DropFusedPull();
  sync_push_.Reset();
  for (auto& push : pushes_) push = nullptr;
  for (auto& push : row_pushes_) push = nullptr;
  DropRowPulls();
  return result;
}

absl::Status Trainer::RunUntilDone() {
  std::optional<KeepAlive> own_keep_alive;
  keep_alive_ = parts_.keep_alive;
  if (keep_alive_ == nullptr) {
    own_keep_alive.emplace(
        parts_.coordinator,
        PreparingReport(options_.worker_index, options_.incarnation),
        options_.heartbeat_interval, parts_.clock);
    keep_alive_ = &*own_keep_alive;
  }
  RETURN_IF_ERROR(AllocateBuffers());
  ASSIGN_OR_RETURN(bool over, JobAlreadyOver());
  while (true) {
    if (!over) RETURN_IF_ERROR(Train());
    ASSIGN_OR_RETURN(bool train_again, AwaitJobEnd());
    if (!train_again) return absl::OkStatus();
    // The servers hold an earlier step now: pull whatever version they
    // have (SYNC too), with nothing of the last run in flight.
    over = false;
    job_over_ = false;
    version_ = 0;
    failing_since_ = absl::InfiniteFuture();
    DropFusedPull();
    for (auto& push : pushes_) push = nullptr;
    for (auto& push : row_pushes_) push = nullptr;
    DropRowPulls();
    // Memory the last run's failed calls left to a server is not trained
    // in again (Train() waited for every push).
    RETURN_IF_ERROR(ReplaceRetiredBuffers());
  }
}

absl::StatusOr<bool> Trainer::AwaitJobEnd() {
  const absl::Duration interval =
      std::max(options_.heartbeat_interval, absl::Milliseconds(10));
  absl::Time last_answer = parts_.clock->Now();
  bool announced = false;
  while (true) {
    // The chief holds the answer until the job has news for this worker
    // (a long poll), so the next report goes out as soon as a held answer
    // comes; a chief that answers at once is asked again an interval
    // after the last report went out.
    const absl::Time asked = parts_.clock->Now();
    absl::StatusOr<StatusResponse> status =
        Heartbeat(/*finished=*/true, kJobEndWait);
    if (!status.ok()) {
      // The chief may have ended the job and exited between two reports.
      if (std::optional<StatusResponse> ended = keep_alive_->JobEnded()) {
        status = *std::move(ended);
      }
    }
    if (status.ok()) {
      last_answer = parts_.clock->Now();
      switch (status->state()) {
        case SUCCEEDED:
          return false;
        case FAILED:
          return absl::AbortedError(
              absl::StrCat("the job failed after this worker's last step: ",
                           status->message()));
        case TRAINING:
          if (status->generation() != generation_) {
            LOG(INFO) << "the chief restored the model (generation "
                      << status->generation() << ", global step "
                      << status->global_step()
                      << ") after this worker's last step; training the "
                         "steps since again";
            generation_ = status->generation();
            return true;
          }
          break;
        case FINAL_EVALUATION:
          if (status->generation() != generation_) {
            // A server lost after training ended: the chief restored the
            // final checkpoint, the model as trained; nothing to train.
            LOG(INFO) << "the chief restored the final model (generation "
                      << status->generation() << ") after training ended";
            generation_ = status->generation();
          }
          break;
        default:  // PAUSED, or a restarted chief preparing
          break;
      }
      if (!announced) {
        LOG(INFO) << "last step done; waiting for the chief to end the job "
                     "(final checkpoint and evaluation)";
        announced = true;
      }
    } else if (parts_.clock->Now() - last_answer >
               options_.recovery.recovery_timeout) {
      return absl::UnavailableError(absl::StrCat(
          "this worker trained its last step, but the chief has not answered "
          "for ",
          absl::FormatDuration(options_.recovery.recovery_timeout), " since (",
          status.status().message(),
          "), so the job's outcome is unknown (worker --recovery_timeout_s)"));
    }
    parts_.clock->SleepUntil(asked + interval);
  }
}

absl::Status Trainer::Train() {
  TrainLoop loop;
  loop.log_every =
      std::max(1, options_.spec.config().logging().log_every_steps());
  loop.next_heartbeat = parts_.clock->Now() + options_.heartbeat_interval;
  const absl::Time training_start = parts_.clock->Now();
  chief_answered_at_ = training_start;
  pull_ = sync_ ? PullInForwardGroups(params_[current_], version_)
                : PsHandles(PullFor(params_[current_], 0, clock_,
                                    /*join=*/true));
  while (true) {
    ASSIGN_OR_RETURN(const Next next, TrainOneStep(loop));
    if (next == Next::kStop) break;
    if (next == Next::kRestart) RETURN_IF_ERROR(Restart());
  }
  SettleBackground();
  if (background_ != nullptr) phases_.background = background_->busy();
  // Pushes still in flight carry gradients past what the job needed (the
  // servers reached the total, or the chief ended training): one that
  // fails now (a server stopping or restarting as the job ends) loses
  // nothing the job keeps, so it is not this run's error; the chief, which
  // this worker asks next, decides whether training goes on.
  absl::Status last_pushes;
  for (auto& push : pushes_) {
    if (push != nullptr) last_pushes.Update(push->Wait());
  }
  for (auto& push : row_pushes_) {
    if (push != nullptr) last_pushes.Update(push->Wait());
  }
  if (!last_pushes.ok()) {
    LOG(WARNING) << "a push sent after the job's last needed step failed ("
                 << last_pushes.message() << "); the job does not need it";
  }
  // A prefetch for a step past the job's total is not needed.
  DropRowPulls();
  LogFinished(parts_.clock->Now() - training_start);
  return absl::OkStatus();
}

absl::StatusOr<Trainer::Next> Trainer::TrainOneStep(TrainLoop& loop) {
  // Tests hold a worker mid-training (the job cannot end meanwhile).
  FaultPoint("worker.train_step");
  ASSIGN_OR_RETURN(Next next, AwaitParameters());
  if (next != Next::kGoOn) return next;
  std::optional<Batch> own;  // models without tables
  // Computed or not, its buffers build a later batch.
  absl::Cleanup recycle = [this, &own] {
    if (own.has_value()) parts_.batches->Recycle(*std::move(own));
  };
  const Batch* batch = nullptr;
  if (has_tables_) {
    ASSIGN_OR_RETURN(batch, StageBatch());
  } else if ((own = parts_.batches->Next()).has_value()) {
    batch = &*own;
  }
  // Streams are endless; defensive.
  if (batch == nullptr) return Next::kStop;
  RETURN_IF_ERROR(LoadParametersAndPrefetch());
  ASSIGN_OR_RETURN(next, AwaitEarlierPush());
  if (next != Next::kGoOn) return next;
  ASSIGN_OR_RETURN(next, PullRows());
  if (next != Next::kGoOn) return next;
  ASSIGN_OR_RETURN(const BatchStats stats, ComputeGradients(*batch));
  ASSIGN_OR_RETURN(next, PushGradients());
  if (next == Next::kGoOn) {
    ASSIGN_OR_RETURN(next, PushRows());
  }
  // Not SYNC: both pushes travel while the next step computes into the
  // other gradient buffer.
  if (!sync_) grad_slot_ = 1 - grad_slot_;
  if (next == Next::kGoOn) RecordStep(*batch, stats, loop.log_every);
  ReleaseBatch();  // computed: a failed push does not train it again
  if (next != Next::kGoOn) return next;
  ASSIGN_OR_RETURN(next, HeartbeatIfDue(loop));
  if (next != Next::kGoOn) return next;
  return PullNextStep();
}

absl::StatusOr<Trainer::Next> Trainer::AwaitParameters() {
  const absl::Time pull_wait_start = parts_.clock->Now();
  if (pull_ticket_ != BackgroundQueue::kNothing) {
    background_->WaitFor(pull_ticket_);  // it set pull_
    pull_ticket_ = BackgroundQueue::kNothing;
  }
  absl::Status pulled = pull_.Wait();
  Observe(&PhaseTotals::pull_wait, &WorkerMetrics::pull_wait_seconds,
          pull_wait_start);
  std::shared_ptr<PsHandle> carried_by = std::move(carried_by_);
  carried_by_ = nullptr;
  if (!pulled.ok() && carried_by != nullptr) {
    // The push failed (or the pull it carried): handled once, as a push.
    for (auto& push : pushes_) {
      if (push == carried_by) push = nullptr;
    }
    return AfterPushError(pulled);
  }
  if (!pulled.ok()) return AfterFailure(pulled);
  if (fresh_push_wait_.has_value()) {
    // The last step pulled after its push: what that cost it.
    prefetch_policy_.ObserveFreshStep(
        last_compute_,
        *fresh_push_wait_ + (parts_.clock->Now() - pull_wait_start));
    fresh_push_wait_.reset();
  }
  version_ = pull_.min_version();
  if (joining_) {
    // The servers place a (re)joining worker no further behind than the
    // slowest live one.
    clock_ = std::max(clock_, pull_.worker_clock());
    joining_ = false;
  }
  if (version_ >= options_.spec.total_steps()) return Next::kStop;
  return Next::kGoOn;
}

absl::Status Trainer::LoadParametersAndPrefetch() {
  // Read in place where the device allows (no copy): the buffer is not
  // written again until the model has been given the other one, or the
  // step is over (a fresh pull, a restart).
  const std::vector<absl::Span<float>>& values = params_[current_].values;
  RETURN_IF_ERROR(parts_.model->UseParameters(
      std::vector<absl::Span<const float>>(values.begin(), values.end())));
  if (next_prefetch_.has_value()) {  // chosen as the last step's push left
    prefetching_ = *next_prefetch_;
    next_prefetch_.reset();
  } else {
    prefetching_ = !sync_ && prefetch_policy_.PrefetchThisStep();
  }
  if (prefetching_ && fused_prefetch_ != nullptr) {
    // The last step's push carries it (into params_[1 - current_]).
    carried_by_ = fused_prefetch_;
    pull_ = PsHandles(std::move(fused_prefetch_));
    fused_prefetch_ = nullptr;
    ++prefetched_steps_;
  } else if (prefetching_) {
    // Fetch the next step's parameters while this one computes (bounded:
    // the server answers once the slowest worker is close enough). Started
    // after the pushes before it (by the background thread, for a model
    // with tables; here otherwise): a pull that overtook the last step's
    // push would miss this worker's own update (one step staler: the MLP
    // on a GPU host lost most of a point of accuracy to it).
    joining_ = false;
    pull_ticket_ = StartCalls(
        [this, targets = Targets(params_[1 - current_]), clock = clock_ + 1] {
          pull_ = PsHandles(StartPull(targets, 0, clock, /*join=*/false));
        },
        /*rows_setup=*/false);
    ++prefetched_steps_;
  }
  return absl::OkStatus();
}

absl::StatusOr<Trainer::Next> Trainer::AwaitEarlierPush() {
  return AwaitPushes(grad_slot_);
}

absl::StatusOr<Trainer::Next> Trainer::AwaitPushes(int slot) {
  const absl::Time push_wait_start = parts_.clock->Now();
  if (push_tickets_[slot] != BackgroundQueue::kNothing) {
    background_->WaitFor(push_tickets_[slot]);
    push_tickets_[slot] = BackgroundQueue::kNothing;
  }
  if (pushes_[slot] == nullptr && row_pushes_[slot] == nullptr) {
    return Next::kGoOn;
  }
  absl::Status pushed, pushed_rows;
  if (pushes_[slot] != nullptr) pushed = pushes_[slot]->Wait();
  if (row_pushes_[slot] != nullptr) pushed_rows = row_pushes_[slot]->Wait();
  Observe(&PhaseTotals::push_wait, &WorkerMetrics::push_wait_seconds,
          push_wait_start);
  pushes_[slot] = nullptr;
  row_pushes_[slot] = nullptr;
  if (!pushed.ok()) return AfterPushError(pushed);
  // Not SYNC, Aborted is a failure like any other.
  if (!pushed_rows.ok()) return AfterPushError(pushed_rows);
  rejected_in_a_row_ = 0;
  return Next::kGoOn;
}

absl::StatusOr<BatchStats> Trainer::ComputeGradients(const Batch& batch) {
  // PullRows succeeded when there are rows: the batch's sparse features.
  const SparseBatch* sparse =
      has_tables_ ? &staged_[staged_current_].rows->sparse() : nullptr;
  ExampleBatch example;
  example.size = batch.size;
  example.features = batch.features;
  example.labels = batch.labels;
  example.seed = StepSeed(options_.spec.config().training().seed());
  example.sparse = sparse;
  if (sync_) StartSyncPush(example);
  const absl::Time compute_start = parts_.clock->Now();
  ASSIGN_OR_RETURN(BatchStats stats,
                   parts_.model->TrainStep(example, grads_[grad_slot_].values));
  if (clipper_.enabled()) {
    clipper_.ClipRest(grads_[grad_slot_].values, clipped_,
                      sparse != nullptr ? sparse->row_gradients
                                        : std::vector<absl::Span<float>>());
    clipped_.assign(clipped_.size(), false);
  }
  last_batch_loss_ = stats.loss_sum / std::max<int64_t>(1, stats.examples);
  const absl::Time computed = parts_.clock->Now();
  last_compute_ = computed - compute_start;
  Observe(&PhaseTotals::compute, &WorkerMetrics::compute_seconds,
          compute_start);
  parts_.clock->SleepFor(options_.slowdown.Delay(
      computed, computed - compute_start, options_.worker_index,
      options_.spec.num_workers()));
  return stats;
}

absl::StatusOr<Trainer::Next> Trainer::PushGradients() {
  if (bounded_) {
    // Started here, not by the background thread: its worker clock must
    // reach the servers before this worker's pull for the next clock.
    pushes_[grad_slot_] = parts_.client->Push(
        Sources(grads_[grad_slot_]), version_, options_.worker_index, clock_);
    return Next::kGoOn;
  }
  if (fuse_) return PushThenPull();
  if (!sync_) {
    // It travels while the next step computes into the other buffer (or,
    // not prefetching, until PullNextStep waits for it); the background
    // thread starts it (gRPC's send path) while that step begins.
    push_tickets_[grad_slot_] = StartCalls(
        [this, slot = grad_slot_, sources = Sources(grads_[grad_slot_]),
         version = version_] {
          pushes_[slot] = parts_.client->Push(
              sources, version, options_.worker_index, std::nullopt);
        },
        /*rows_setup=*/false);
    return Next::kGoOn;
  }
  return FinishSyncPush();
}

absl::StatusOr<Trainer::Next> Trainer::PushThenPull() {
  // The policy's choice for the next step, made as this push leaves: a
  // next step that prefetches has its prefetch ride on this push.
  const bool next_prefetches = prefetch_policy_.PrefetchThisStep();
  next_prefetch_ = next_prefetches;
  if (prefetching_) {
    // The next step's parameters are on their way into params_[1 -
    // current_]; params_[current_] is free (this step computed) and will
    // hold the step after next's, read after this push as a prefetch
    // started next step would have been.
    if (!next_prefetches) {
      pushes_[grad_slot_] =
          parts_.client->Push(Sources(grads_[grad_slot_]), version_,
                              options_.worker_index, std::nullopt);
      return Next::kGoOn;
    }
    fused_prefetch_ = parts_.client->PushThenPull(
        Sources(grads_[grad_slot_]), Targets(params_[current_]), version_,
        options_.worker_index);
    pushes_[grad_slot_] = fused_prefetch_;
    return Next::kGoOn;
  }
  // Fresh: the next step's parameters after every gradient this worker
  // sent, so the earlier push ends first.
  const absl::Time wait_start = parts_.clock->Now();
  ASSIGN_OR_RETURN(const Next next, AwaitPushes(1 - grad_slot_));
  if (next != Next::kGoOn) return next;
  fresh_push_wait_ = parts_.clock->Now() - wait_start;
  std::shared_ptr<PsHandle> call = parts_.client->PushThenPull(
      Sources(grads_[grad_slot_]), Targets(params_[current_]), version_,
      options_.worker_index);
  pushes_[grad_slot_] = call;
  carried_by_ = call;
  pull_ = PsHandles(std::move(call));
  fused_fresh_ = true;
  return Next::kGoOn;
}

void Trainer::DropFusedPull() {
  // Ended before the buffer it writes is used again (pushes_ may hold the
  // same handle, so dropping ours alone need not wait).
  if (fused_prefetch_ != nullptr) (void)fused_prefetch_->Wait();
  fused_prefetch_ = nullptr;
  next_prefetch_.reset();
  fused_fresh_ = false;
  carried_by_ = nullptr;
}

absl::StatusOr<Trainer::Next> Trainer::HeartbeatIfDue(TrainLoop& loop) {
  // The multiple of report_every_ the parameters are at, followed down
  // too (a restore to an earlier step makes its multiples due again).
  // Brought forward at most every early_report_spacing.
  const int64_t multiple = report_every_ > 0 ? version_ / report_every_ : 0;
  report_early_ |= multiple > seen_multiple_;
  seen_multiple_ = multiple;
  const absl::Time now = parts_.clock->Now();
  const bool early =
      report_early_ && now - loop.last_report >= options_.early_report_spacing;
  if (!early && now < loop.next_heartbeat) return Next::kGoOn;
  report_early_ = false;
  loop.last_report = now;
  loop.next_heartbeat = now + options_.heartbeat_interval;
  ASSIGN_OR_RETURN(const bool chief_wants_more, CheckInWithTheChief());
  if (!chief_wants_more) return Next::kGoOn;
  if (job_over_) return Next::kStop;
  RETURN_IF_ERROR(Recover(absl::OkStatus()));
  return job_over_ ? Next::kStop : Next::kRestart;
}

void Trainer::ReportEvery(int64_t steps) {
  if (steps == report_every_) return;
  report_every_ = steps;
  // The multiples already passed were the chief's to see.
  seen_multiple_ = steps > 0 ? version_ / steps : 0;
}

absl::StatusOr<Trainer::Next> Trainer::PullNextStep() {
  if (sync_) {
    pull_ = PullInForwardGroups(params_[current_], version_ + 1);
    return Next::kGoOn;
  }
  if (prefetching_) {
    current_ = 1 - current_;  // Prefetched by LoadParametersAndPrefetch.
    return Next::kGoOn;
  }
  if (fused_fresh_) {  // pull_ is this step's push-then-pull
    fused_fresh_ = false;
    return Next::kGoOn;
  }
  // Fresh: the parameters after every gradient this worker sent.
  const absl::Time wait_start = parts_.clock->Now();
  for (int slot : {0, 1}) {
    ASSIGN_OR_RETURN(const Next next, AwaitPushes(slot));
    if (next != Next::kGoOn) return next;
  }
  fresh_push_wait_ = parts_.clock->Now() - wait_start;
  // clock_ already counts this step: the pull is for the next one.
  pull_ = PsHandles(PullFor(params_[current_], 0, clock_, /*join=*/false));
  return Next::kGoOn;
}

absl::StatusOr<Trainer::Next> Trainer::AfterFailure(const absl::Status& cause) {
  RETURN_IF_ERROR(OnFailure(cause));
  return job_over_ ? Next::kStop : Next::kRestart;
}

absl::StatusOr<Trainer::Next> Trainer::AfterPushError(
    const absl::Status& pushed) {
  if (absl::IsInvalidArgument(pushed)) {
    RETURN_IF_ERROR(OnRejected(pushed));
    return Next::kRestart;
  }
  return AfterFailure(pushed);
}

void Trainer::Observe(absl::Duration PhaseTotals::*phase,
                      HistogramCell* WorkerMetrics::*cell, absl::Time start) {
  const absl::Duration spent = parts_.clock->Now() - start;
  phases_.*phase += spent;
  if (const WorkerMetrics* live = parts_.live_metrics; live != nullptr) {
    (live->*cell)->Observe(absl::ToDoubleSeconds(spent));
  }
}

void Trainer::RecordStep(const Batch& batch, const BatchStats& stats,
                         int log_every) {
  failing_since_ = absl::InfiniteFuture();
  ++local_steps_;
  ++clock_;
  if (const WorkerMetrics* live = parts_.live_metrics; live != nullptr) {
    live->steps->Increment();
    live->examples->Add(batch.size);
  }
  examples_ += batch.size;
  window_.loss += stats.loss_sum;
  window_.correct += stats.correct;
  window_.examples += stats.examples;
  if (local_steps_ % log_every == 0) {
    LOG(INFO) << absl::StrFormat(
        "step %d (global %d/%d), epoch %d, batch loss %.4f, accuracy %.3f",
        local_steps_, version_, options_.spec.total_steps(), batch.epoch,
        stats.loss_sum / stats.examples,
        static_cast<double>(stats.correct) / stats.examples);
  }
}

absl::StatusOr<bool> Trainer::CheckInWithTheChief() {
  // A chief that stopped answering (a stopped process, a lost host) would
  // hold this thread for the whole deadline at every report: while it is
  // silent, it is asked at most every kSilentChiefRetry, briefly; the
  // keep-alive thread goes on reporting this worker meanwhile.
  const bool skip =
      chief_silent_ && parts_.clock->Now() < next_silent_check_in_;
  absl::StatusOr<StatusResponse> status =
      skip ? absl::UnavailableError(chief_silence_cause_)
           : Heartbeat(
                 false, absl::ZeroDuration(),
                 chief_silent_ ? kSilentChiefDeadline : absl::ZeroDuration());
  if (!status.ok()) {
    if (!skip) {
      chief_silent_ = true;
      next_silent_check_in_ = parts_.clock->Now() + kSilentChiefRetry;
      chief_silence_cause_ = std::string(status.status().message());
    }
    // A missed heartbeat is the keep-alive's and the recovery policy's
    // business, and training goes on: a restarting chief finds the
    // servers' state newer than any checkpoint. But a chief gone for the
    // whole recovery timeout is not coming back soon, and without it
    // nothing saves this training or ends the job: stop, rather than
    // train until the servers give up on it (--chief_timeout_s, 15m).
    const absl::Duration silent = parts_.clock->Now() - chief_answered_at_;
    if (silent > options_.recovery.recovery_timeout) {
      return absl::UnavailableError(absl::StrCat(
          "the chief has not answered for ", absl::FormatDuration(silent),
          " while this worker trained (", status.status().message(),
          "): nothing saves this training or ends the job without it, so "
          "this worker stops; restart the chief, then the worker (worker "
          "--recovery_timeout_s sets how long it waits)"));
    }
    if (!skip) LOG(WARNING) << status.status().message();
    return false;
  }
  chief_silent_ = false;
  chief_answered_at_ = parts_.clock->Now();
  ReportEvery(status->report_every_steps());
  if (status->state() == FAILED) {
    return absl::AbortedError(
        absl::StrCat("the chief ended the job: ", status->message()));
  }
  if (status->state() == SUCCEEDED || status->state() == FINAL_EVALUATION) {
    // The chief has the job's final model (another worker's push reached
    // the total, or an operator ended training): a step trained now would
    // change that model after its final checkpoint.
    LOG(INFO) << "the chief finished training at global step "
              << status->global_step() << "; stopping";
    job_over_ = true;
    return true;
  }
  return status->state() == PAUSED || status->state() == INITIALIZING ||
         status->generation() != generation_;
}

void Trainer::LogFinished(absl::Duration elapsed) const {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  auto share = [seconds](absl::Duration d) {
    return 100 * absl::ToDoubleSeconds(d) / std::max(seconds, 1e-9);
  };
  LOG(INFO) << absl::StrFormat(
      "finished: %d steps, %d examples%s in %.3fs (%.0f examples/s); global "
      "step %d; time: compute %.1f%%, pull wait %.1f%%, push wait %.1f%%, "
      "other %.1f%%%s%s%s",
      local_steps_, examples_,
      sync_ ? absl::StrCat(", ", stale_, " stale") : "", seconds,
      examples_ / std::max(seconds, 1e-9), version_, share(phases_.compute),
      share(phases_.pull_wait), share(phases_.push_wait),
      std::max(0.0, 100 - share(phases_.compute) - share(phases_.pull_wait) -
                        share(phases_.push_wait)),
      // Part of "other": the rows' ids found, their pulls and pushes sent.
      has_tables_
          ? absl::StrFormat(" (rows setup %.1f%%)", share(phases_.rows_setup))
          : "",
      sync_ ? "" : PrefetchSummary(),
      clipper_.enabled() ? absl::StrFormat("; gradients clipped in %d steps",
                                           clipper_.clipped_steps())
                         : "");
  if (background_ != nullptr) {
    LOG(INFO) << absl::StrFormat(
        "background thread: busy %.1f%% of the time starting calls while "
        "the steps ran (rows prepared, pulls and pushes sent)",
        share(phases_.background));
  }
}

std::string Trainer::PrefetchSummary() const {
  std::string summary = absl::StrFormat(
      "; next parameters prefetched in %.0f%% of steps",
      100.0 * prefetched_steps_ / std::max<int64_t>(1, local_steps_));
  if (const double share = prefetch_policy_.wait_share(); share >= 0) {
    absl::StrAppendFormat(
        &summary, " (a fresh pull's wait: %.1f%% of the compute)", 100 * share);
  }
  return summary;
}

}  // namespace psflow
