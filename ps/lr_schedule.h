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

namespace psflow {

struct LrScheduleConfig {
  enum class Kind { kConstant, kExponential, kCosine };
  Kind kind = Kind::kConstant;
  double learning_rate = 0.01;
  // kExponential.
  int64_t decay_steps = 0;
  double decay_rate = 1.0;
  bool staircase = false;
  // kCosine: decay_steps above, and the floor as a fraction of the rate.
  double alpha = 0.0;
  // Any kind: linear warm-up over this many steps (0 = none).
  int64_t warmup_steps = 0;
};

class LrSchedule {
 public:
  // InvalidArgument naming the field for bad values (negative or zero
  // rates, decay_steps <= 0 where needed, alpha outside [0, 1], ...).
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
