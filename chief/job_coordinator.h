// The chief's view of a running job, free of any transport: the job's
// state machine, which tasks have joined, their heartbeats and progress,
// and the evaluator's results. The gRPC Coordinator service
// (coordinator_service.h) and the chief's main loop both drive it.
//
//   INITIALIZING --SetSpec--> TRAINING --every worker done--> FINAL_EVALUATION
//        |                       |                                 |
//        +-------Fail------------+--------> FAILED        SUCCEEDED <+
//
// Long polls: a finished worker's report that asks to wait for news, and
// the evaluator's status request that asks to wait for a change, are
// answered when the job's state or generation changes (the job ended, was
// paused, restored) or when their wait, at most kMaxHold, is over; so
// every task hears the job's end the moment the chief decides it instead
// of at its next poll. In process the caller's thread waits (Progress,
// Status); the gRPC service hands over a callback (ProgressOrHold,
// StatusOrHold) that a holder thread runs (StartHolding).
//
// Thread-safe.
#ifndef PSFLOW_CHIEF_JOB_COORDINATOR_H_
#define PSFLOW_CHIEF_JOB_COORDINATOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/server_board.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/oom_kills.h"
#include "proto/coordinator.pb.h"

namespace psflow {

class JobCoordinator {
 public:
  struct Options {
    int num_workers = 1;
    // Worker addresses from TF_CONFIG, for messages about missing tasks.
    std::map<int, std::string> worker_addresses;
    // A worker silent for this long is declared lost.
    absl::Duration heartbeat_timeout = absl::Seconds(60);
    // SYNC: when lost workers leave too few to fill a step, how long the
    // job waits for them to come back (a restarted worker registers again,
    // as Kubernetes restarts it) before it fails. Shorter than the
    // workers' own 5-minute recovery window, so the ones left still wait.
    absl::Duration worker_replacement_timeout = absl::Minutes(4);
    // For Describe (`psctl status`): the other tasks' TF_CONFIG addresses
    // and the job's name and mode.
    std::string chief_task = "chief-0";  // or "worker-0" acting as chief
    std::string chief_address;
    std::map<int, std::string> ps_addresses;
    std::string evaluator_address;  // empty: the job has no evaluator
    std::string job_name;
    UpdateMode mode = UPDATE_MODE_UNSPECIFIED;
    // Heartbeat timeouts, waits and deadlines are measured on it.
    Clock* clock = &RealClock();
  };

  explicit JobCoordinator(const Options& options);
  // Answers the calls still held (StopHolding).
  ~JobCoordinator();

  // The clock the job's time is measured on (Options::clock).
  Clock& clock() const { return *options_.clock; }

  // INITIALIZING -> TRAINING; from now on tasks can register.
  void SetSpec(const JobSpec& spec);

  // Moves to FAILED (from any state but SUCCEEDED) with `message`.
  void Fail(const std::string& message);

  // FINAL_EVALUATION -> SUCCEEDED (or TRAINING -> SUCCEEDED with no
  // evaluator).
  void Succeed();

  // RPC handlers. A task that asks for the status or reports progress
  // after the job ended (SUCCEEDED or FAILED), or is answered so after a
  // long poll, has heard the outcome.
  absl::StatusOr<JobSpec> Register(const RegisterTaskRequest& request);
  // A report that asks to wait for news (wait_for_news_ms, from a finished
  // worker, in the current generation, while TRAINING or FINAL_EVALUATION)
  // blocks the calling thread, waiting on the clock, until the state or
  // generation changes or that wait (at most kMaxHold) is over.
  StatusResponse Progress(const ProgressReport& report);
  // A request that asks to wait for a change (wait_for_change_ms, from
  // the evaluator, knowing the current state and generation of a job not
  // ended) blocks likewise.
  StatusResponse Status(const StatusRequest& request);
  // Records the evaluator's report. ABORTED, recording nothing, for an
  // evaluation of the live model whose pulls may have met a restore: the
  // job is paused, or its model generation is not the report's
  // (EvaluationReport.model_generation); the evaluator evaluates again.
  absl::Status Evaluation(const EvaluationReport& report);

  // The longest a long poll is held: well within the callers' deadlines
  // (a worker's report has 10 s; the evaluator's request 5 s beyond the
  // wait it asks for).
  static constexpr absl::Duration kMaxHold = absl::Seconds(5);

  // Long polls for a server that must not block its threads: as Progress
  // and Status, but `answer` is called exactly once with the status. A
  // call that may wait is held, while a holder runs, until the job has
  // news for it or its wait is over, then answered from the holder's
  // thread (or from StopHolding); any other is answered at once on this
  // thread. One call is held per worker and one for the evaluator, however
  // many the network sends: a second one answers the first at once.
  using Answer = std::function<void(const StatusResponse&)>;
  void ProgressOrHold(const ProgressReport& report, Answer answer);
  void StatusOrHold(const StatusRequest& request, Answer answer);
  // Starts the holder: a thread that answers held calls when they are due
  // (woken by every change of the state, as the waits below are, and by
  // the clock at the end of a wait). Until it starts, nothing is held.
  void StartHolding();
  // Answers every held call now, stops the holder, and answers calls at
  // once from then on; restore requests still waiting are refused
  // (FailedPrecondition), and later ones at once. Idempotent; a server
  // stops holding before it drains, since a held call would otherwise hold
  // its shutdown.
  void StopHolding();
  // How many calls are held now (for tests).
  int HeldCalls() const;

  // The status, for the chief itself.
  StatusResponse Status() const;

  // After the job ended: blocks until every task still in it has heard the
  // outcome (workers registered and not lost, finished ones included: they
  // wait for it; an evaluator that registered and has not sent its final
  // evaluation; tasks that asked to join while the chief was initializing),
  // or `deadline`; returns the tasks that did not.
  std::vector<std::string> WaitForOutcomeHeard(absl::Time deadline);

  // Blocks until every worker has registered, one has already finished
  // training (the job does not need the rest), the job failed, or
  // `deadline`; returns the workers still missing, as
  // "worker-1 at host:port".
  std::vector<std::string> WaitForWorkers(absl::Time deadline);

  // Blocks until every worker finished (or was lost, in async mode),
  // the job failed, or `deadline` (PAUSED is not an end). Declares silent
  // workers lost: a lost worker fails a sync job; an async job continues
  // without it unless no worker is left. Returns true when training is over
  // (finished or failed: see state()), false at the deadline.
  bool WaitForTrainingEnd(absl::Time deadline);

  // The global step the chief wants to hear of as soon as training reaches
  // it (the next step-based save's, or 0 for none): WaitForTrainingEnd
  // returns false as soon as a report says it is reached. `every_steps`
  // (the saves' period) is told to the workers in every status answer
  // while training (StatusResponse.report_every_steps), so they report
  // each multiple at once.
  void WatchForStep(int64_t step, int64_t every_steps);

  // TRAINING -> FINAL_EVALUATION: training is over and the final model is
  // evaluated (by the evaluator, or by the chief itself). Finished workers
  // wait on; a restore from now on (Pause, Resume) comes back to it.
  void BeginFinalEvaluation();

  // BeginFinalEvaluation, then blocks until the evaluator reports its
  // final evaluation (kReceived: last_evaluation()), the evaluator is given
  // up on (kGivenUp: `deadline`, silent past the heartbeat timeout, or not
  // joined that long after the first call; or the job failed), or `wake`
  // (kWaiting: call again to wait on).
  enum class FinalEvaluationWait { kReceived, kGivenUp, kWaiting };
  FinalEvaluationWait AwaitFinalEvaluation(absl::Time deadline,
                                           absl::Time wake);
  // AwaitFinalEvaluation until received or given up; the report if it came.
  std::optional<EvaluationReport> RunFinalEvaluation(absl::Time deadline);

  // The final evaluation the chief ran itself (no evaluator, or none
  // arrived): recorded as the job's final metrics, evaluated by
  // `chief_task`, and the evaluator is no longer waited for.
  void RecordChiefEvaluation(EvaluationReport report);

  // TRAINING or FINAL_EVALUATION -> PAUSED (`why` is the status message
  // while paused): the servers' model is about to be restored. False in
  // any other state.
  bool Pause(const std::string& why);

  // Blocks until every worker still in the job (registered, not lost, not
  // finished) has reported `paused` since Pause(), or `deadline`; returns
  // those that did not.
  std::vector<std::string> WaitForWorkersPaused(absl::Time deadline);

  // PAUSED -> the state paused (TRAINING, or FINAL_EVALUATION for a final
  // model restored after training) with a new generation, at
  // `global_step`.
  void Resume(int64_t global_step);

  // A `psctl ckpt restore` request, run by the chief's main loop, which
  // calls `done` with the restored step or the error.
  struct RestoreRequest {
    std::string path;
    std::function<void(absl::StatusOr<int64_t>)> done;
  };
  // At most kMaxPendingRestores wait; beyond, `done` answers
  // ResourceExhausted at once. Each waiting request holds an open call
  // (the server's drain waits for it), so none waits for a loop that will
  // not run: once the job's outcome is decided (Succeed, Fail) every
  // waiting request, and every later one at once, is answered
  // FailedPrecondition (the job has ended: a new job restores), and so
  // are they once the coordinator stops holding calls (StopHolding).
  void RequestRestore(RestoreRequest request);
  static constexpr size_t kMaxPendingRestores = 4;
  // The oldest pending request, if any.
  std::optional<RestoreRequest> TakeRestoreRequest();
  // How many requests wait (for tests).
  int PendingRestores() const;

  JobState state() const;
  // How many workers are in each state now.
  struct WorkerCounts {
    int missing = 0;  // never registered
    int training = 0;
    int finished = 0;
    int lost = 0;
  };
  WorkerCounts CountWorkers() const;
  // Workers that must not hold back the others in BOUNDED mode: those not
  // registered, lost or finished, by index.
  std::vector<int> WorkersOutsideBound() const;
  // Each worker's latest heartbeat (empty reports for silent workers).
  std::vector<ProgressReport> LastReports() const;
  std::optional<EvaluationReport> last_evaluation() const;

  // What the chief is doing or waiting for now, in words ("waiting for
  // the workers to join").
  void SetActivity(std::string activity);
  std::string activity() const;
  // Start-up is over: every worker joined (tasks missing from now on are
  // faults, not late starters).
  void EndStartup();
  // The parameter servers as the chief last saw them; the chief's probes
  // and checks record into it.
  ServerBoard& servers() { return servers_; }
  // The whole job as `psctl status` shows it: the chief, every parameter
  // server, worker and evaluator with its state and what it waits for.
  JobDescription Describe() const;

 private:
  struct Worker {
    bool registered = false;
    uint64_t incarnation = 0;
    absl::Time last_contact;
    ProgressReport last;
    bool lost = false;
    bool heard_outcome = false;
  };

  bool EndedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return state_ == SUCCEEDED || state_ == FAILED;
  }
  // Tasks that must still hear the outcome.
  std::vector<std::string> UninformedLocked() const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // UninformedLocked().empty(), without building the names.
  bool AllInformedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Whether the evaluator runs (or is still starting) and has neither
  // sent its final evaluation nor heard the outcome.
  bool EvaluatorAwaitsOutcomeLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Whether a worker still runs and has not heard the outcome. Workers
  // that trained their last step wait for it too (worker/trainer.h). While
  // the job starts, so does a worker not heard from yet: a job that fails
  // early (a diverging model fails in its first second) must not leave a
  // late starter waiting for a chief that is gone; and after it, when the
  // start-up ended with a worker already finished (unheard_may_run_).
  bool AwaitsOutcome(const Worker& w) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return (w.registered || starting_ || unheard_may_run_) && !w.lost &&
           !w.heard_outcome;
  }
  // Whether a worker trained its last step of the model as it is now: a
  // step reached before a restore (an older generation) does not count,
  // since the steps after the restored one must be trained again.
  bool FinishedLocked(const Worker& w) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return w.last.finished() && w.last.generation() == generation_;
  }

  // A long poll: what its caller knows of the job (anything else is news
  // to it), and where it is held.
  struct Known {
    // The worker's index, or kEvaluatorSlot.
    int slot = 0;
    JobState state = JOB_STATE_UNSPECIFIED;
    int64_t generation = 0;
  };
  static constexpr int kEvaluatorSlot = -1;
  struct HeldCall {
    Known known;
    absl::Time until;
    Answer answer;
  };
  // Records the report or request (the handlers' part without a wait).
  void ProgressLocked(const ProgressReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StatusRequestLocked(const StatusRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a call that may wait knows; nullopt when it is to be answered at
  // once (it did not ask to wait, or there is news for it already).
  std::optional<Known> ProgressKnownLocked(const ProgressReport& report) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  std::optional<Known> StatusKnownLocked(const StatusRequest& request) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The end of a wait of `wait_ms` (as asked) starting now.
  absl::Time HoldUntil(int64_t wait_ms) const;
  // Whether the job's state or generation is news to `known`. To a
  // finished worker, FINAL_EVALUATION is no news after TRAINING.
  bool NewsLocked(const Known& known) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // A call answered now with an ended job has told its task the outcome.
  void AnsweredLocked(const Known& known) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks until news for `known` or `until`, then as AnsweredLocked.
  void WaitForNewsLocked(const Known& known, absl::Time until)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Holds a call (one per slot) while holding_; returns the answer to run
  // now instead: the call's own when it is not held, or the one it
  // replaced, or none.
  Answer HoldLocked(const Known& known, absl::Time until, Answer answer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the held calls that are due (news, or their wait is over; all
  // of them with `all`) and returns their answers.
  std::vector<Answer> TakeDueLocked(bool all)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The holder thread's loop.
  void AnswerHeldCalls();
  // Why a restore request cannot wait now (the job ended, or the
  // coordinator stopped holding calls); OK while one may.
  absl::Status RestoreRefusalLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Removes the waiting restore requests and returns them with the answer
  // they get (RestoreRefusalLocked) when it is not OK; none otherwise.
  std::deque<RestoreRequest> TakeRefusedRestoresLocked(absl::Status* why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers them `why` (outside the lock: an answer finishes an RPC).
  static void Refuse(std::deque<RestoreRequest> requests,
                     const absl::Status& why);

  StatusResponse StatusLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool TrainingOverLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool TrainingOverOrStepReachedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Moves every task's last contact forward by the part of a gap since the
  // last heartbeat check that the chief spent not running.
  void ForgiveOwnStallLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Workers registered and not lost, and how many training needs: a SYNC
  // step's replicas, else one.
  std::pair<int, int> WorkersNeededLocked() const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  std::string WorkerNameLocked(int index) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const Options options_;
  const absl::Time started_ = options_.clock->Now();
  // The host's out-of-memory kills when the job started: a worker lost
  // while it rose (on the chief's host) was most likely killed for memory.
  const int64_t oom_kills_at_start_ = OomKillsSoFar();
  ServerBoard servers_;
  mutable Mutex mu_;
  std::string activity_ ABSL_GUARDED_BY(mu_) = "starting";
  bool starting_ ABSL_GUARDED_BY(mu_) = true;
  // The start-up ended with a worker that had trained its last step (a
  // chief restarted late in the job, which does not wait for the others
  // to register): workers not heard from yet still await the outcome.
  bool unheard_may_run_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Time> evaluator_last_contact_ ABSL_GUARDED_BY(mu_);
  // When WaitForTrainingEnd last checked the workers' heartbeats: a gap
  // far longer than its one-second wakeups, with no task heard meanwhile,
  // means the chief itself did not run (stopped, starved), and the tasks'
  // silence during it is forgiven.
  std::optional<absl::Time> last_liveness_check_ ABSL_GUARDED_BY(mu_);
  JobState state_ ABSL_GUARDED_BY(mu_) = INITIALIZING;
  std::string message_ ABSL_GUARDED_BY(mu_);
  JobSpec spec_ ABSL_GUARDED_BY(mu_);
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mu_);
  // Since when lost workers leave too few to train (a SYNC step's
  // replicas, else one), and the first loss that did it; none while enough
  // are live.
  std::optional<absl::Time> short_of_workers_since_ ABSL_GUARDED_BY(mu_);
  std::string short_of_workers_cause_ ABSL_GUARDED_BY(mu_);
  int64_t global_step_ ABSL_GUARDED_BY(mu_) = 0;
  // WatchForStep's.
  int64_t step_of_interest_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t report_every_steps_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<EvaluationReport> evaluation_ ABSL_GUARDED_BY(mu_);
  bool final_evaluation_received_ ABSL_GUARDED_BY(mu_) = false;
  bool evaluator_registered_ ABSL_GUARDED_BY(mu_) = false;
  bool evaluator_heard_outcome_ ABSL_GUARDED_BY(mu_) = false;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time paused_at_ ABSL_GUARDED_BY(mu_);
  JobState paused_from_ ABSL_GUARDED_BY(mu_) = TRAINING;
  // When the final evaluation was first waited for: an evaluator that has
  // not joined is given up on a heartbeat timeout after it.
  std::optional<absl::Time> final_evaluation_since_ ABSL_GUARDED_BY(mu_);
  std::deque<RestoreRequest> restore_requests_ ABSL_GUARDED_BY(mu_);
  // StopHolding ran: no loop answers a restore request any more.
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Tasks that asked to join while the chief was still initializing and
  // have not been answered since ("worker-1 at host:port", "evaluator"):
  // if the job fails before they join, they must hear it.
  std::set<std::string> waiting_to_join_ ABSL_GUARDED_BY(mu_);
  // Long polls held for the holder to answer, by slot; while holding_.
  std::map<int, HeldCall> held_ ABSL_GUARDED_BY(mu_);
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  // Counts calls held: a new one may end its wait before those the holder
  // waits for.
  uint64_t holds_made_ ABSL_GUARDED_BY(mu_) = 0;
  // Orders StartHolding and StopHolding; never taken with mu_ held.
  Mutex holder_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::thread holder_ ABSL_GUARDED_BY(holder_mu_);
};

}  // namespace psflow

#endif  // PSFLOW_CHIEF_JOB_COORDINATOR_H_
