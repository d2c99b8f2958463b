// The update rule's settings as plain values: the optimizer's
// hyperparameters and the learning-rate schedule, converted from the job
// config's protos (filling proto3 defaults: momentum 0.9, beta1 0.9, beta2
// 0.999, epsilon 1e-7, ...) and validated. The job config validates with
// these, and the parameter server builds its Optimizer and LrSchedule from
// them (ps/optimizer.h, ps/lr_schedule.h), so both agree on what is valid
// without the job layer linking the server. Errors are InvalidArgument
// naming the field, the value and the fix. Plain values; thread-compatible.
#ifndef PSFLOW_COMMON_JOB_UPDATE_RULE_H_
#define PSFLOW_COMMON_JOB_UPDATE_RULE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/optimizer.pb.h"

namespace psflow {

struct OptimizerParams {
  enum class Kind { kSgd, kMomentum, kAdagrad, kAdam, kAdamW, kFtrl };
  Kind kind = Kind::kSgd;
  double momentum = 0.9;                   // kMomentum
  bool nesterov = false;                   // kMomentum
  double initial_accumulator_value = 0.1;  // kAdagrad, kFtrl
  double beta1 = 0.9;                      // kAdam, kAdamW
  double beta2 = 0.999;                    // kAdam, kAdamW
  double epsilon = 1e-7;                   // kAdagrad, kAdam, kAdamW
  double weight_decay = 0.0;               // kAdamW
  double l1 = 0.0;                         // kFtrl
  double l2 = 0.0;                         // kFtrl
  double learning_rate_power = -0.5;       // kFtrl
};

// "sgd", "momentum", "adagrad", "adam", "adamw", "ftrl".
const char* OptimizerKindName(OptimizerParams::Kind kind);

// InvalidArgument naming the field for out-of-range hyperparameters.
absl::Status ValidateOptimizerParams(const OptimizerParams& params);

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

// InvalidArgument naming the field for bad values (negative or zero
// rates, decay_steps <= 0 where needed, alpha outside [0, 1], ...).
absl::Status ValidateLrScheduleConfig(const LrScheduleConfig& config);

absl::StatusOr<OptimizerParams> OptimizerParamsFromProto(
    const OptimizerConfig& proto);

absl::StatusOr<LrScheduleConfig> LrScheduleFromProto(
    const LearningRateSchedule& proto);

}  // namespace psflow

#endif  // PSFLOW_COMMON_JOB_UPDATE_RULE_H_
