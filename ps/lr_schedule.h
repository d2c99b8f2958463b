// Learning-rate schedules, computed on the parameter server from the global
// step (no learning-rate variable to become a hot spot).
//
//   constant:     lr
//   exponential:  lr * decay_rate ^ (step / decay_steps)
//                 (floor of the exponent when staircase: "step decay")
//   cosine:       lr * (alpha + (1 - alpha) * (1 + cos(pi * s / decay_steps)) /
//   2)
//                 with s = min(step, decay_steps)
//   linear warm-up (composes with any of them): for step < warmup_steps the
//                 rate is scaled by (step + 1) / warmup_steps.
//
// The same formulas as Keras's ExponentialDecay and CosineDecay. Immutable;
// safe to share between threads.
#ifndef PSFLOW_PS_LR_SCHEDULE_H_
#define PSFLOW_PS_LR_SCHEDULE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/job/update_rule.h"

namespace psflow {

class LrSchedule {
 public:
  // InvalidArgument naming the field for bad values
  // (ValidateLrScheduleConfig).
  static absl::StatusOr<LrSchedule> Create(const LrScheduleConfig& config);

  // The learning rate for global step `step` (0 for the first update).
  double At(int64_t step) const;

  const LrScheduleConfig& config() const { return config_; }

 private:
  explicit LrSchedule(const LrScheduleConfig& config) : config_(config) {}
  LrScheduleConfig config_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_LR_SCHEDULE_H_
