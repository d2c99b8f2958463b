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

#include <cstdint>

#include "absl/time/time.h"

namespace psflow {

class PrefetchPolicy {
 public:
  enum class Choice { kAuto, kAlways, kNever };

  // AUTO prefetches when a fresh step's exposed wait is above this share
  // of its compute, and goes back to fresh pulls below kFreshBelow.
  static constexpr double kPrefetchAbove = 0.10;
  static constexpr double kFreshBelow = 0.05;
  // AUTO: fresh steps measured before the first decision, and prefetched
  // steps between two fresh probes.
  static constexpr int kMeasureSteps = 8;
  static constexpr int kProbeEvery = 256;

  explicit PrefetchPolicy(Choice choice) : choice_(choice) {}

  // Whether the step about to compute prefetches the next one's
  // parameters (otherwise it waits for its push and pulls afterwards).
  bool PrefetchThisStep();

  // After a step that did not prefetch: its compute time and the time it
  // then waited on the wire (its push, and the pull of the parameters
  // for the next step).
  void ObserveFreshStep(absl::Duration compute, absl::Duration wait);

  // The exposed wait's share of the compute, as last estimated (-1 before
  // any fresh step): for the worker's summary line.
  double wait_share() const;
  bool prefetching() const { return prefetching_; }

 private:
  const Choice choice_;
  bool prefetching_ = false;
  // Fresh steps observed; prefetched steps since the last fresh one.
  int64_t fresh_steps_ = 0;
  int64_t since_probe_ = 0;
  // Moving averages over fresh steps, in seconds.
  double compute_s_ = 0, wait_s_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_PREFETCH_POLICY_H_
