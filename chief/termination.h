// SIGINT/SIGTERM to the chief. Kubernetes sends SIGTERM before it evicts or
// preempts a pod, then SIGKILL after terminationGracePeriodSeconds; Ctrl-C
// on `psctl local` sends SIGINT. Whatever the chief is doing, the first
// signal ends the job properly, in bounded time, and the process exits
// 128 + the signal:
//
//  - while training runs, it asks the TrainingSupervisor to pause the
//    workers and save a checkpoint of the current step before the job ends
//    (a preemption save, as TensorFlow's PreemptionCheckpointHandler does);
//    a save still running `save_bound` after the signal is given up: the
//    stop handler below ends the job without it (the result says so, the
//    servers are told to stop), bounded by `stop_bound`, then the process
//    exits;
//  - outside training (starting up, planning, initializing, the final
//    save, the final evaluation, ending the job) there is nothing to save
//    that the servers do not hold: the stop handler the chief installed
//    (chief_runner.cc) runs on a thread of its own: it fails the job
//    naming the signal, tells the parameter servers to stop, lets the
//    tasks hear the outcome (bounded), writes the result and releases the
//    checkpoint directory; then the process exits. One still running
//    `stop_bound` after the signal exits anyway. Without a handler (before
//    the chief started, after it ended) the process exits at once.
//
// A second signal exits at once.
#ifndef PSFLOW_CHIEF_TERMINATION_H_
#define PSFLOW_CHIEF_TERMINATION_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "common/mutex.h"

namespace psflow {

class ChiefTermination {
 public:
  struct Options {
    // How long the preemption save during training may take.
    absl::Duration save_bound = absl::Seconds(60);
    // How long the stop outside training may take: the servers' stop
    // request and the tasks' hearing of the outcome (a few seconds each)
    // fit well inside it, and it inside Kubernetes' default 30 s grace.
    absl::Duration stop_bound = absl::Seconds(15);
    // Ends the process with a status (tests record it instead; it then
    // returns).
    std::function<void(int)> exit;  // default: std::_Exit
  };
  explicit ChiefTermination(absl::Duration save_bound);
  explicit ChiefTermination(Options options);
  // Cancels the bounds' exits still pending (tests; a process exits).
  ~ChiefTermination();

  ChiefTermination(const ChiefTermination&) = delete;
  ChiefTermination& operator=(const ChiefTermination&) = delete;

  // From the signal thread (common/signals.h), with "SIGINT" or "SIGTERM".
  void OnSignal(const std::string& signal);

  // The signal that asked for a stop, once one did.
  std::optional<std::string> requested() const;
  // 128 + the signal's number once one was requested; else `otherwise`.
  int ExitCode(int otherwise) const;

  // Brackets the training the supervisor runs: signals in between are
  // saved for; others run the stop handler. Once a stop outside training
  // began, training does not begin: SetTraining(true) returns false and
  // the caller must not train (the process is about to exit).
  bool SetTraining(bool training);
  // For a wait within training in which nothing can be saved (a lost
  // server awaited): leaves training, so a signal from now on runs the
  // stop handler at once, and returns true; returns false, changing
  // nothing, when training was not bracketed or a stop was already
  // requested (the caller then stops waiting). ResumeTraining() after.
  bool LeaveTrainingToWait();
  // SetTraining(true) after LeaveTrainingToWait.
  bool ResumeTraining() { return SetTraining(true); }

  // What a signal outside training runs (see above), with the signal's
  // name, before the process exits. While the handler runs, these two
  // wait for it to return (what it uses must outlive it).
  using StopHandler = std::function<void(const std::string& signal)>;
  void SetStopHandler(StopHandler handler);
  void ClearStopHandler() { SetStopHandler(nullptr); }

 private:
  // What the bounds' and the stop's threads share with this object; they
  // may outlive it (a process exiting), so they hold it too.
  struct State {
    explicit State(Options o) : options(std::move(o)) {}
    const Options options;
    // Notified when the ChiefTermination goes: pending bounds do not exit.
    Notification gone;
    mutable Mutex mu;
    std::optional<std::string> requested ABSL_GUARDED_BY(mu);
    bool training ABSL_GUARDED_BY(mu) = false;
    StopHandler stop_handler ABSL_GUARDED_BY(mu);
    // The stop handler was started (by a signal outside training, or a
    // save past its bound); it runs now or ran.
    bool stop_began ABSL_GUARDED_BY(mu) = false;
    bool handler_running ABSL_GUARDED_BY(mu) = false;
  };

  // From a thread of its own: once `bound` has passed, logs `why` and
  // exits with `code`, unless the ChiefTermination went first.
  static void ExitAfter(const std::shared_ptr<State>& state,
                        absl::Duration bound, int code, std::string why);
  // Runs `stop` on a thread of its own, bounded by stop_bound, then exits
  // with `code`. The caller marked the handler running.
  static void RunStop(const std::shared_ptr<State>& state, StopHandler stop,
                      const std::string& signal, int code);
  // The preemption save's bound: once it passed with the save still under
  // way, the stop handler ends the job without it.
  static void GiveUpTheSaveAfter(const std::shared_ptr<State>& state,
                                 const std::string& signal, int code);

  const std::shared_ptr<State> state_;
};

}  // namespace psflow

#endif  // PSFLOW_CHIEF_TERMINATION_H_
