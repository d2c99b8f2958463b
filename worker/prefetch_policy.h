// When an ASYNC or BOUNDED worker pulls its next step's parameters
// (TrainingConfig.parameter_prefetch, docs/architecture.md "Overlap").
//
// Prefetching pulls them while the step computes: the wait for the wire is
// hidden, but the parameters miss this worker's own last update or two,
// and each gradient is that much staler when the server applies it (the
// async convnet: staleness 2.96 and 1.8 points of accuracy after one epoch
// against 0.91 without; bench/RESULTS.md). Pulling after the push is
// applied gives fresh parameters at the price of that wait. AUTO takes the
// fresh pull while the wait it exposes is small next to the compute, and
// prefetches once it is not, probing now and then whether that changed.
//
// Not thread-safe: the training loop's own.
#ifndef PSFLOW_WORKER_PREFETCH_POLICY_H_
#define PSFLOW_WORKER_PREFETCH_POLICY_H_

#include <vector>

#include "absl/time/time.h"

namespace psflow {

class PrefetchPolicy {
 public:
  enum class Choice { kAuto, kAlways, kNever };

  // AUTO prefetches when fresh steps' exposed wait (the median of the last
  // kMeasureSteps) is above this share of their compute, and goes back to
  // fresh pulls when a probe finds it below kFreshBelow.
  static constexpr double kPrefetchAbove = 0.10;
  static constexpr double kFreshBelow = 0.05;
  // AUTO: fresh steps measured per decision (a median: one slow step, the
  // first ones' connection set-up say, does not decide), and prefetched
  // steps between two fresh probes.
  static constexpr int kMeasureSteps = 8;
  static constexpr int kProbeEvery = 64;
  // AUTO, prefetching: goes back to fresh pulls once this many probes in a
  // row found the wire cheap. One probe alone is noisy (it may land while
  // the server happens to be idle), and a wrong switch costs
  // kMeasureSteps fresh steps at full wait before the policy turns back.
  static constexpr int kProbesToDecide = 3;

  explicit PrefetchPolicy(Choice choice) : choice_(choice) {}

  // Whether the step about to compute prefetches the next one's
  // parameters (otherwise it waits for its push and pulls afterwards).
  bool PrefetchThisStep();

  // After a step that did not prefetch: its compute time and the time it
  // then waited on the wire (its push, and the pull of the parameters
  // for the next step).
  void ObserveFreshStep(absl::Duration compute, absl::Duration wait);

  // The exposed wait's share of the compute as last measured (the median
  // of the latest fresh steps, or the latest probe); -1 before any fresh
  // step. For the worker's summary line.
  double wait_share() const { return wait_share_; }
  bool prefetching() const { return prefetching_; }

 private:
  const Choice choice_;
  bool prefetching_ = false;
  // Prefetched steps since the last probe.
  int since_probe_ = 0;
  // Fresh steps' wait / compute since the last decision.
  std::vector<double> shares_;
  // Prefetching: the latest probes' wait / compute (at most
  // kProbesToDecide, oldest first).
  std::vector<double> probes_;
  double wait_share_ = -1;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_PREFETCH_POLICY_H_
