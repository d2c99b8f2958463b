#include "chief/job_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/oom_kills.h"
#include "proto/protocol.h"

namespace psflow {

JobCoordinator::JobCoordinator(const Options& options)
    : options_(options),
      servers_(options.ps_addresses),
      workers_(std::max(0, options.num_workers)),
      // Distinct per chief start: workers that outlived a previous chief
      // see a new generation and pull the (restored) model again.
      generation_(absl::ToUnixMicros(absl::Now())) {}

void JobCoordinator::SetSpec(const JobSpec& spec) {
  MutexLock lock(&mu_);
  if (state_ != INITIALIZING) return;
  spec_ = spec;
  state_ = TRAINING;
  // The model is set (initialized or restored) only now: a generation the
  // tasks saw while this chief initialized named no model, and a report
  // made under it (a worker that went on training meanwhile) is stale.
  generation_ = std::max(generation_ + 1, absl::ToUnixMicros(absl::Now()));
}

void JobCoordinator::Fail(const std::string& message) {
  std::deque<RestoreRequest> refused;
  absl::Status why;
  {
    MutexLock lock(&mu_);
    // Already ended (a worker's report or the training wait set FAILED
    // itself): the outcome stands, and waiting restores are refused now.
    if (state_ != SUCCEEDED && state_ != FAILED) {
      state_ = FAILED;
      message_ = message;
    }
    refused = TakeRefusedRestoresLocked(&why);
  }
  Refuse(std::move(refused), why);
}

void JobCoordinator::Succeed() {
  std::deque<RestoreRequest> refused;
  absl::Status why;
  {
    MutexLock lock(&mu_);
    if (state_ != FAILED) {
      state_ = SUCCEEDED;
      message_ = "job finished";
    }
    refused = TakeRefusedRestoresLocked(&why);
  }
  Refuse(std::move(refused), why);
}

std::string JobCoordinator::WorkerNameLocked(int index) const {
  auto it = options_.worker_addresses.find(index);
  return it == options_.worker_addresses.end()
             ? absl::StrCat("worker-", index)
             : absl::StrCat("worker-", index, " at ", it->second);
}

absl::StatusOr<JobSpec> JobCoordinator::Register(
    const RegisterTaskRequest& request) {
  if (request.protocol_version() != kProtocolVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("protocol version ", request.protocol_version(),
                     " from the task, but the chief speaks ", kProtocolVersion,
                     "; run the same psflow release on every task"));
  }
  MutexLock lock(&mu_);
  // Only this job's own tasks are remembered (a bounded set).
  std::string asker;
  if (request.task_type() == "worker" && request.task_index() >= 0 &&
      request.task_index() < static_cast<int>(workers_.size())) {
    asker = WorkerNameLocked(request.task_index());
  } else if (request.task_type() == "evaluator") {
    asker = "evaluator";
  }
  if (state_ == INITIALIZING) {
    // It retries until the spec is set; if the job fails first, the chief
    // waits (bounded) for it to hear so (WaitForOutcomeHeard).
    if (!asker.empty()) waiting_to_join_.insert(asker);
    return absl::FailedPreconditionError(
        "the chief is still initializing (waiting for parameter servers)");
  }
  waiting_to_join_.erase(asker);
  if (state_ == FAILED) {
    // This answer tells the task the outcome.
    if (request.task_type() == "evaluator") {
      evaluator_heard_outcome_ = true;
    } else if (!asker.empty()) {
      workers_[request.task_index()].heard_outcome = true;
    }
    return absl::AbortedError(absl::StrCat("the job failed: ", message_));
  }
  if (request.task_type() == "worker") {
    const int index = request.task_index();
    if (index < 0 || index >= static_cast<int>(workers_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker ", index, " is not in this job's cluster (",
                       workers_.size(), " workers); check its TF_CONFIG"));
    }
    Worker& worker = workers_[index];
    if (worker.registered && worker.incarnation != request.incarnation()) {
      LOG(WARNING) << WorkerNameLocked(index) << " restarted (new incarnation)";
    }
    worker.registered = true;
    worker.lost = false;
    worker.incarnation = request.incarnation();
    worker.last_contact = options_.clock->Now();
    LOG(INFO) << WorkerNameLocked(index) << " joined";
  } else if (request.task_type() == "evaluator") {
    evaluator_registered_ = true;
    evaluator_last_contact_ = options_.clock->Now();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("task type \"", request.task_type(),
                     "\" does not register with the chief"));
  }
  return spec_;
}

JobCoordinator::~JobCoordinator() { StopHolding(); }

StatusResponse JobCoordinator::Progress(const ProgressReport& report) {
  MutexLock lock(&mu_);
  ProgressLocked(report);
  if (std::optional<Known> known = ProgressKnownLocked(report)) {
    WaitForNewsLocked(*known, HoldUntil(report.wait_for_news_ms()));
  }
  return StatusLocked();
}

void JobCoordinator::ProgressLocked(const ProgressReport& report) {
  const int index = report.worker_index();
  if (index >= 0 && index < static_cast<int>(workers_.size())) {
    Worker& worker = workers_[index];
    worker.registered = true;
    worker.lost = false;
    worker.last_contact = options_.clock->Now();
    worker.last = report;
    // A worker that reports an error ends its part itself: the chief does
    // not wait for it to hear the outcome.
    if (EndedLocked() || !report.error().empty()) worker.heard_outcome = true;
    // Steps of an older generation belong to a model that was replaced.
    if (report.generation() == generation_) {
      global_step_ = std::max(global_step_, report.global_step());
    }
    if (!report.error().empty() && state_ == TRAINING) {
      state_ = FAILED;
      message_ =
          absl::StrCat(WorkerNameLocked(index), " failed: ", report.error());
    }
  }
}

StatusResponse JobCoordinator::StatusLocked() const {
  StatusResponse status;
  status.set_state(state_);
  status.set_global_step(global_step_);
  if (state_ == TRAINING) status.set_report_every_steps(report_every_steps_);
  status.set_total_steps(spec_.total_steps());
  status.set_message(message_);
  status.set_generation(generation_);
  return status;
}

bool JobCoordinator::Pause(const std::string& why) {
  MutexLock lock(&mu_);
  if (state_ != TRAINING && state_ != FINAL_EVALUATION) return false;
  paused_from_ = state_;
  state_ = PAUSED;
  message_ = why;
  paused_at_ = options_.clock->Now();
  return true;
}

std::vector<std::string> JobCoordinator::WaitForWorkersPaused(
    absl::Time deadline) {
  MutexLock lock(&mu_);
  auto unpaused = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> names;
    for (size_t i = 0; i < workers_.size(); ++i) {
      const Worker& w = workers_[i];
      // A preparing worker has not pulled yet; it hears of the pause in
      // the answer to the report it sends before its first pull.
      if (!w.registered || w.lost || w.last.finished() || w.last.preparing()) {
        continue;
      }
      if (!w.last.paused() || w.last_contact < paused_at_) {
        names.push_back(WorkerNameLocked(i));
      }
    }
    return names;
  };
  auto all_paused = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ != PAUSED || unpaused().empty();
  };
  options_.clock->AwaitWithDeadline(mu_, Condition(&all_paused), deadline);
  return unpaused();
}

void JobCoordinator::Resume(int64_t global_step) {
  MutexLock lock(&mu_);
  if (state_ != PAUSED) return;
  ++generation_;
  global_step_ = global_step;
  state_ = paused_from_;
  message_.clear();
}

absl::Status JobCoordinator::RestoreRefusalLocked() const {
  // The chief's main loop serves restores while the job runs; once its
  // outcome is decided, or the server stops, none will be served, and a
  // request left waiting would hold the server's drain for good.
  if (EndedLocked()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job has ended (", JobState_Name(state_),
        message_.empty() ? "" : ": ", message_,
        "); psctl ckpt restore rolls back a running job only: start the job "
        "again with the same checkpoint directory (it resumes from the "
        "newest checkpoint), then restore this one into it"));
  }
  if (stopped_) {
    return absl::FailedPreconditionError(
        "the chief is stopping and serves no more restores");
  }
  return absl::OkStatus();
}

std::deque<JobCoordinator::RestoreRequest>
JobCoordinator::TakeRefusedRestoresLocked(absl::Status* why) {
  *why = RestoreRefusalLocked();
  if (why->ok()) return {};
  return std::exchange(restore_requests_, {});
}

void JobCoordinator::Refuse(std::deque<RestoreRequest> requests,
                            const absl::Status& why) {
  for (RestoreRequest& request : requests) {
    LOG(WARNING) << "not restoring " << request.path << ": " << why.message();
    request.done(why);
  }
}

void JobCoordinator::RequestRestore(RestoreRequest request) {
  absl::Status refused;
  {
    MutexLock lock(&mu_);
    refused = RestoreRefusalLocked();
    if (refused.ok() && restore_requests_.size() < kMaxPendingRestores) {
      restore_requests_.push_back(std::move(request));
      return;
    }
  }
  if (!refused.ok()) {
    request.done(refused);
    return;
  }
  // Each waiting request holds an open call: they are few.
  request.done(absl::ResourceExhaustedError(
      absl::StrCat(kMaxPendingRestores,
                   " checkpoint restores are already waiting; ask "
                   "again once they are done")));
}

int JobCoordinator::PendingRestores() const {
  MutexLock lock(&mu_);
  return static_cast<int>(restore_requests_.size());
}

std::optional<JobCoordinator::RestoreRequest>
JobCoordinator::TakeRestoreRequest() {
  MutexLock lock(&mu_);
  if (restore_requests_.empty()) return std::nullopt;
  RestoreRequest request = std::move(restore_requests_.front());
  restore_requests_.pop_front();
  return request;
}

StatusResponse JobCoordinator::Status() const {
  MutexLock lock(&mu_);
  return StatusLocked();
}

StatusResponse JobCoordinator::Status(const StatusRequest& request) {
  MutexLock lock(&mu_);
  StatusRequestLocked(request);
  if (std::optional<Known> known = StatusKnownLocked(request)) {
    WaitForNewsLocked(*known, HoldUntil(request.wait_for_change_ms()));
  }
  return StatusLocked();
}

void JobCoordinator::StatusRequestLocked(const StatusRequest& request) {
  if (request.task_type() == "evaluator")
    evaluator_last_contact_ = options_.clock->Now();
  if (EndedLocked()) {
    if (request.task_type() == "evaluator") {
      evaluator_heard_outcome_ = true;
    } else if (request.task_type() == "worker" && request.task_index() >= 0 &&
               request.task_index() < static_cast<int>(workers_.size())) {
      workers_[request.task_index()].heard_outcome = true;
    }
  }
}

bool JobCoordinator::EvaluatorAwaitsOutcomeLocked() const {
  // An evaluator not heard from yet is still starting (training never
  // waits for it): it hears the end as a late worker does.
  const bool evaluator_runs =
      evaluator_registered_ || !options_.evaluator_address.empty();
  return evaluator_runs && !final_evaluation_received_ &&
         !evaluator_heard_outcome_;
}

std::vector<std::string> JobCoordinator::UninformedLocked() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = workers_[i];
    if (AwaitsOutcome(w)) {
      names.push_back(WorkerNameLocked(static_cast<int>(i)));
    }
  }
  if (EvaluatorAwaitsOutcomeLocked()) names.push_back("evaluator");
  for (const std::string& task : waiting_to_join_) {
    if (std::find(names.begin(), names.end(), task) == names.end()) {
      names.push_back(task);
    }
  }
  return names;
}

bool JobCoordinator::AllInformedLocked() const {
  for (const Worker& w : workers_) {
    if (AwaitsOutcome(w)) return false;
  }
  return !EvaluatorAwaitsOutcomeLocked() && waiting_to_join_.empty();
}

std::vector<std::string> JobCoordinator::WaitForOutcomeHeard(
    absl::Time deadline) {
  MutexLock lock(&mu_);
  // Evaluated on every release of mu_ (each heartbeat and status call)
  // while the chief waits: it names no one, so that a call costs no
  // allocation per worker (issue 33).
  auto all_heard = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return EndedLocked() && AllInformedLocked();
  };
  options_.clock->AwaitWithDeadline(mu_, Condition(&all_heard), deadline);
  return UninformedLocked();
}

absl::Status JobCoordinator::Evaluation(const EvaluationReport& report) {
  MutexLock lock(&mu_);
  evaluator_last_contact_ = options_.clock->Now();
  if (final_evaluation_received_) {
    return absl::OkStatus();  // the chief's own came first
  }
  if (report.has_model_generation() &&
      (state_ == PAUSED || state_ == INITIALIZING ||
       report.model_generation() != generation_)) {
    return absl::AbortedError(absl::StrCat(
        "the chief ", state_ == PAUSED ? "is restoring" : "restored",
        " the model while this evaluation pulled it (generation ",
        report.model_generation(), ", now ", generation_,
        "): a pull may have read a server mid-restore, so its numbers are "
        "not recorded; evaluate again"));
  }
  evaluation_ = report;
  evaluation_->set_evaluated_by("evaluator-0");
  if (report.final()) final_evaluation_received_ = true;
  return absl::OkStatus();
}

void JobCoordinator::RecordChiefEvaluation(EvaluationReport report) {
  MutexLock lock(&mu_);
  report.set_final(true);
  report.set_evaluated_by(options_.chief_task);
  evaluation_ = std::move(report);
  final_evaluation_received_ = true;
}

std::vector<std::string> JobCoordinator::WaitForWorkers(absl::Time deadline) {
  MutexLock lock(&mu_);
  auto all_joined = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ == FAILED) return true;
    bool all = true, any_finished = false;
    for (const Worker& w : workers_) {
      all &= w.registered;
      any_finished |= FinishedLocked(w);
    }
    // The others already trained the job to its end: stop waiting.
    return all || any_finished;
  };
  options_.clock->AwaitWithDeadline(mu_, Condition(&all_joined), deadline);
  std::vector<std::string> missing;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].registered) missing.push_back(WorkerNameLocked(i));
  }
  return missing;
}

void JobCoordinator::WatchForStep(int64_t step, int64_t every_steps) {
  MutexLock lock(&mu_);
  step_of_interest_ = std::max<int64_t>(step, 0);
  report_every_steps_ = std::max<int64_t>(every_steps, 0);
}

bool JobCoordinator::TrainingOverOrStepReachedLocked() const {
  return TrainingOverLocked() ||
         (step_of_interest_ > 0 && global_step_ >= step_of_interest_);
}

bool JobCoordinator::TrainingOverLocked() const {
  if (state_ == PAUSED) return false;
  if (state_ != TRAINING) return true;
  bool any_finished = false;
  for (const Worker& w : workers_) {
    // A worker that never joined only matters until another one reached
    // the end of training.
    if (!w.registered) continue;
    if (!w.lost && !FinishedLocked(w)) return false;
    any_finished |= FinishedLocked(w);
  }
  return any_finished;
}

std::pair<int, int> JobCoordinator::WorkersNeededLocked() const {
  int alive = 0;
  for (const Worker& w : workers_) alive += w.registered && !w.lost;
  if (spec_.config().training().mode() != SYNC) return {alive, 1};
  const int needed = std::max(1, spec_.ps_config().replicas_to_aggregate() > 0
                                     ? spec_.ps_config().replicas_to_aggregate()
                                     : static_cast<int>(workers_.size()));
  return {alive, needed};
}

void JobCoordinator::ForgiveOwnStallLocked(absl::Time now) {
  // The checks run at least once a second while training; a gap far longer
  // means this thread did not run (the process was stopped or starved, or
  // a long save held the thread). Reports queued meanwhile arrive only as
  // the process runs again, in no particular order: one task heard first
  // must not leave the others, whose reports are still queued, declared
  // lost. So every task not heard since the last check has the gap's
  // excess forgiven; a task that is really gone is declared lost a gap
  // later.
  constexpr absl::Duration kCheckInterval = absl::Seconds(1);
  constexpr absl::Duration kStall = absl::Seconds(3);
  if (last_liveness_check_.has_value()) {
    const absl::Duration gap = now - *last_liveness_check_;
    if (gap > kStall) {
      const absl::Duration stalled = gap - kCheckInterval;
      LOG(WARNING) << "the chief did not check the tasks for about "
                   << absl::FormatDuration(
                          absl::Trunc(stalled, absl::Milliseconds(100)))
                   << " (stopped, starved of CPU, or busy); the tasks' "
                      "silence meanwhile is not held against them";
      for (Worker& w : workers_) {
        if (w.last_contact <= *last_liveness_check_) w.last_contact += stalled;
      }
      if (evaluator_last_contact_.has_value() &&
          *evaluator_last_contact_ <= *last_liveness_check_) {
        *evaluator_last_contact_ += stalled;
      }
    }
  }
  last_liveness_check_ = now;
}

bool JobCoordinator::WaitForTrainingEnd(absl::Time deadline) {
  MutexLock lock(&mu_);
  while (true) {
    const absl::Time now = options_.clock->Now();
    ForgiveOwnStallLocked(now);
    if (state_ == TRAINING) {
      for (size_t i = 0; i < workers_.size(); ++i) {
        Worker& w = workers_[i];
        if (w.lost || FinishedLocked(w) ||
            now - w.last_contact < options_.heartbeat_timeout) {
          continue;
        }
        w.lost = true;
        const std::string what = absl::StrCat(
            WorkerNameLocked(i), " stopped reporting (no heartbeat for ",
            absl::FormatDuration(options_.heartbeat_timeout), ")",
            OomKillNote(oom_kills_at_start_));
        if (spec_.config().training().mode() == SYNC) {
          // Backup workers (replicas_to_aggregate below the workers) let a
          // sync job go on without some; the lost one may still return.
          if (const auto [alive, needed] = WorkersNeededLocked();
              alive >= needed) {
            LOG(WARNING) << what << "; sync training continues with the "
                         << alive << " left (each step needs " << needed
                         << "); it may rejoin";
          } else if (!short_of_workers_since_.has_value()) {
            short_of_workers_since_ = now;
            short_of_workers_cause_ = what;
            LOG(WARNING) << what << "; each sync step needs " << needed
                         << " workers and " << alive
                         << " are left: training waits up to "
                         << absl::FormatDuration(
                                options_.worker_replacement_timeout)
                         << " for it to be restarted (it registers again)";
          }
        } else if (WorkersNeededLocked().first > 0) {
          LOG(WARNING) << what << "; "
                       << (spec_.config().training().mode() == BOUNDED
                               ? "bounded-staleness training continues "
                                 "without it (it no longer bounds the others)"
                               : "async training continues without it");
        } else if (!short_of_workers_since_.has_value()) {
          // The last one: the model on the servers is intact, and a
          // restarted worker trains on from it, as in a sync job.
          short_of_workers_since_ = now;
          short_of_workers_cause_ = what;
          LOG(WARNING) << what << "; no worker is left: training waits up to "
                       << absl::FormatDuration(
                              options_.worker_replacement_timeout)
                       << " for one to be restarted (it registers again)";
        }
      }
      if (short_of_workers_since_.has_value()) {
        const bool sync = spec_.config().training().mode() == SYNC;
        if (const auto [alive, needed] = WorkersNeededLocked();
            alive >= needed) {
          LOG(INFO) << (sync ? "sync training has the " : "training has the ")
                    << needed << " worker" << (needed == 1 ? "" : "s")
                    << (sync ? " each step needs" : " it needs") << " again";
          short_of_workers_since_.reset();
        } else if (now - *short_of_workers_since_ >
                   options_.worker_replacement_timeout) {
          state_ = FAILED;
          message_ = absl::StrCat(
              short_of_workers_cause_,
              sync ? absl::StrCat("; a sync job cannot continue: each step "
                                  "needs ",
                                  needed,
                                  " workers (replicas_to_aggregate) and ",
                                  alive, " are left")
                   : "; no worker is left to train",
              ", and the lost ones did not come back within ",
              absl::FormatDuration(options_.worker_replacement_timeout),
              " (chief --worker_replacement_timeout_s)");
        }
      }
      bool anyone_left = false;
      for (const Worker& w : workers_) anyone_left |= !w.lost;
      if (state_ == TRAINING && !anyone_left &&
          !short_of_workers_since_.has_value()) {
        state_ = FAILED;
        message_ = "every worker was lost";
      }
    }
    if (TrainingOverLocked()) return true;
    if (now >= deadline || TrainingOverOrStepReachedLocked()) return false;
    options_.clock->AwaitWithDeadline(
        mu_, Condition(this, &JobCoordinator::TrainingOverOrStepReachedLocked),
        std::min(now + absl::Seconds(1), deadline));
  }
}

void JobCoordinator::BeginFinalEvaluation() {
  MutexLock lock(&mu_);
  if (state_ == TRAINING) state_ = FINAL_EVALUATION;
}

JobCoordinator::FinalEvaluationWait JobCoordinator::AwaitFinalEvaluation(
    absl::Time deadline, absl::Time wake) {
  MutexLock lock(&mu_);
  if (state_ == TRAINING) state_ = FINAL_EVALUATION;
  if (!final_evaluation_since_.has_value()) {
    final_evaluation_since_ = options_.clock->Now();
  }
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return final_evaluation_received_ || state_ == FAILED;
  };
  // The evaluator's liveness is tracked like a worker's: one that has been
  // silent past the heartbeat timeout (it asks for the status every second,
  // also while it evaluates), or has not joined within that long, is not
  // waited for.
  while (!done()) {
    const absl::Time now = options_.clock->Now();
    if (now >= deadline) break;
    // Silent since its last contact; or, not joined yet, since the wait
    // began.
    const absl::Time since =
        evaluator_registered_ && evaluator_last_contact_.has_value()
            ? *evaluator_last_contact_
            : *final_evaluation_since_;
    if (now - since > options_.heartbeat_timeout) {
      LOG(WARNING) << "not waiting for a final evaluation: the evaluator "
                   << (evaluator_registered_ ? "has been silent for "
                                             : "has not joined in ")
                   << absl::FormatDuration(
                          absl::Trunc(now - since, absl::Seconds(1)));
      break;
    }
    if (now >= wake) return FinalEvaluationWait::kWaiting;
    options_.clock->AwaitWithDeadline(
        mu_, Condition(&done),
        std::min({now + absl::Seconds(1), deadline, wake}));
  }
  return final_evaluation_received_ ? FinalEvaluationWait::kReceived
                                    : FinalEvaluationWait::kGivenUp;
}

std::optional<EvaluationReport> JobCoordinator::RunFinalEvaluation(
    absl::Time deadline) {
  if (AwaitFinalEvaluation(deadline, absl::InfiniteFuture()) !=
      FinalEvaluationWait::kReceived) {
    return std::nullopt;
  }
  MutexLock lock(&mu_);
  return evaluation_;
}

JobState JobCoordinator::state() const {
  MutexLock lock(&mu_);
  return state_;
}

JobCoordinator::WorkerCounts JobCoordinator::CountWorkers() const {
  ReaderMutexLock lock(&mu_);
  WorkerCounts counts;
  for (const Worker& w : workers_) {
    if (!w.registered) {
      ++counts.missing;
    } else if (w.lost) {
      ++counts.lost;
    } else if (w.last.finished()) {
      ++counts.finished;
    } else {
      ++counts.training;
    }
  }
  return counts;
}

std::vector<int> JobCoordinator::WorkersOutsideBound() const {
  ReaderMutexLock lock(&mu_);
  std::vector<int> outside;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = workers_[i];
    if (!w.registered || w.lost || w.last.finished()) outside.push_back(i);
  }
  return outside;
}

std::vector<ProgressReport> JobCoordinator::LastReports() const {
  MutexLock lock(&mu_);
  std::vector<ProgressReport> reports;
  for (const Worker& w : workers_) reports.push_back(w.last);
  return reports;
}

std::optional<EvaluationReport> JobCoordinator::last_evaluation() const {
  MutexLock lock(&mu_);
  return evaluation_;
}

void JobCoordinator::SetActivity(std::string activity) {
  MutexLock lock(&mu_);
  activity_ = std::move(activity);
}

std::string JobCoordinator::activity() const {
  MutexLock lock(&mu_);
  return activity_;
}

void JobCoordinator::EndStartup() {
  MutexLock lock(&mu_);
  starting_ = false;
  // A worker that trained its last step before this chief had heard from
  // every worker (a chief restarted late in the job) ended the start-up
  // early: the workers not heard from yet may still train, or wait for the
  // outcome, as they did under the chief before.
  for (const Worker& w : workers_) {
    if (FinishedLocked(w)) unheard_may_run_ = true;
  }
  // A worker not heard from yet is silent from now, not since the epoch:
  // it gets a whole heartbeat timeout before it is declared lost (and no
  // longer awaited to hear the outcome), as one that registered does.
  const absl::Time now = options_.clock->Now();
  for (Worker& w : workers_) {
    if (!w.registered) w.last_contact = now;
  }
}

namespace {

double SecondsSince(const std::optional<absl::Time>& when, absl::Time now) {
  return when.has_value() ? absl::ToDoubleSeconds(now - *when) : -1;
}

}  // namespace

JobDescription JobCoordinator::Describe() const {
  const absl::Time now = options_.clock->Now();
  JobDescription d;
  d.set_job_name(options_.job_name);
  d.set_mode(options_.mode);
  d.set_seconds_since_start(absl::ToDoubleSeconds(now - started_));
  TaskView& chief = *d.add_tasks();
  chief.set_task(options_.chief_task);
  chief.set_address(options_.chief_address);
  chief.set_state(TaskView::COORDINATING);
  chief.set_seconds_since_contact(0);
  for (TaskView& server : servers_.Views(now)) {
    *d.add_tasks() = std::move(server);
  }
  MutexLock lock(&mu_);
  *d.mutable_status() = StatusLocked();
  d.set_activity(activity_);
  d.set_starting(starting_);
  chief.set_detail(activity_);
  const bool ended = EndedLocked();
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = workers_[i];
    TaskView& v = *d.add_tasks();
    v.set_task(absl::StrCat("worker-", i));
    auto address = options_.worker_addresses.find(static_cast<int>(i));
    if (address != options_.worker_addresses.end()) {
      v.set_address(address->second);
    }
    if (!w.registered) {
      v.set_state(TaskView::MISSING);
      v.set_seconds_since_contact(-1);
      v.set_detail(state_ == INITIALIZING
                       ? "has not joined (workers join once the chief has "
                         "initialized the parameter servers)"
                       : "has not joined");
      continue;
    }
    v.set_seconds_since_contact(absl::ToDoubleSeconds(now - w.last_contact));
    v.set_local_steps(w.last.local_steps());
    v.set_global_step(w.last.global_step());
    v.set_examples_per_sec(w.last.examples_per_sec());
    v.set_loss(w.last.loss());
    if (w.lost) {
      v.set_state(TaskView::LOST);
      v.set_detail(
          absl::StrCat("no heartbeat for ",
                       absl::FormatDuration(
                           absl::Trunc(now - w.last_contact, absl::Seconds(1))),
                       " (heartbeat timeout ",
                       absl::FormatDuration(options_.heartbeat_timeout), ")"));
    } else if (!w.last.error().empty()) {
      v.set_state(TaskView::FAILED);
      v.set_detail(w.last.error());
    } else if (w.last.finished()) {
      v.set_state(TaskView::FINISHED);
      v.set_detail("finished its part of training");
    } else if (w.last.preparing()) {
      v.set_state(TaskView::PREPARING);
      v.set_detail(
          "loading its data, building its model and connecting to the "
          "parameter servers");
    } else if (state_ == PAUSED) {
      // The job's state, not the worker's last report: a worker that has
      // not reported since the pause (one waiting on a held server, or
      // between reports) is not training either.
      v.set_state(TaskView::PAUSED);
      const bool heard = w.last.paused() && w.last_contact >= paused_at_;
      v.set_detail(absl::StrCat(
          "paused by the chief: ", message_,
          heard ? ""
                : " (this worker has not reported since the pause; it "
                  "stops at its next report or pull)"));
    } else if (w.last.paused()) {
      v.set_state(TaskView::TRAINING);
      v.set_detail("resuming: the chief ended the pause");
    } else {
      v.set_state(TaskView::TRAINING);
    }
    if (ended && AwaitsOutcome(w)) {
      v.set_detail("has not yet heard that the job ended");
    }
  }
  if (!options_.evaluator_address.empty()) {
    TaskView& v = *d.add_tasks();
    v.set_task("evaluator-0");
    v.set_address(options_.evaluator_address);
    v.set_seconds_since_contact(SecondsSince(evaluator_last_contact_, now));
    if (!evaluator_registered_) {
      v.set_state(TaskView::MISSING);
      v.set_detail("has not joined");
    } else {
      const bool by_chief = evaluation_.has_value() &&
                            evaluation_->evaluated_by() != "evaluator-0";
      v.set_state(by_chief                     ? TaskView::LOST
                  : final_evaluation_received_ ? TaskView::FINISHED
                                               : TaskView::EVALUATING);
      if (by_chief) {
        v.set_detail(absl::StrCat(
            "sent no final evaluation; ", evaluation_->evaluated_by(),
            " evaluated the final model at step ", evaluation_->global_step()));
      } else if (evaluation_.has_value()) {
        v.set_global_step(evaluation_->global_step());
        v.set_loss(evaluation_->loss());
        v.set_accuracy(evaluation_->accuracy());
        v.set_detail(absl::StrCat(evaluation_->final() ? "final" : "latest",
                                  " evaluation at step ",
                                  evaluation_->global_step()));
      } else {
        v.set_detail(state_ == FINAL_EVALUATION
                         ? "the chief waits for its final evaluation"
                         : "no evaluation yet");
      }
      if (ended && !final_evaluation_received_ && !evaluator_heard_outcome_) {
        v.set_detail("has not yet heard that the job ended");
      }
    }
  }
  return d;
}

}  // namespace psflow
