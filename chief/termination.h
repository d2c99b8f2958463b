// SIGINT/SIGTERM to the chief. Kubernetes sends SIGTERM before it evicts or
// preempts a pod, then SIGKILL after terminationGracePeriodSeconds; Ctrl-C
// on `psctl local` sends SIGINT. While training runs, the first signal asks
// the TrainingSupervisor to pause the workers and save a checkpoint of the
// current step before the job ends (a preemption save, as TensorFlow's
// PreemptionCheckpointHandler does); the process exits 128 + the signal.
// The save is bounded: a process still running `save_bound` after the
// signal exits anyway. A second signal, or one outside training (nothing
// to save that the servers do not hold), exits at once.
#ifndef PSFLOW_CHIEF_TERMINATION_H_
#define PSFLOW_CHIEF_TERMINATION_H_

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/mutex.h"

namespace psflow {

class ChiefTermination {
 public:
  explicit ChiefTermination(absl::Duration save_bound)
      : save_bound_(save_bound) {}

  // From the signal thread (common/signals.h), with "SIGINT" or "SIGTERM".
  void OnSignal(const std::string& signal);

  // The signal that asked for a stop, once one did.
  std::optional<std::string> requested() const;
  // 128 + the signal's number once one was requested; else `otherwise`.
  int ExitCode(int otherwise) const;

  // Brackets the training the supervisor runs: signals in between are
  // saved for; others exit at once.
  void SetTraining(bool training);

 private:
  const absl::Duration save_bound_;
  mutable Mutex mu_;
  std::optional<std::string> requested_ ABSL_GUARDED_BY(mu_);
  bool training_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psflow

#endif  // PSFLOW_CHIEF_TERMINATION_H_
