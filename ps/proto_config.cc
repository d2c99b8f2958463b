#include "ps/proto_config.h"

#include "absl/strings/str_cat.h"

namespace psflow {

absl::StatusOr<OptimizerParams> OptimizerParamsFromProto(
    const OptimizerConfig& proto) {
  OptimizerParams params;
  switch (proto.kind()) {
    case OptimizerConfig::SGD:
      params.kind = OptimizerParams::Kind::kSgd;
      break;
    case OptimizerConfig::MOMENTUM:
      params.kind = OptimizerParams::Kind::kMomentum;
      break;
    case OptimizerConfig::ADAGRAD:
      params.kind = OptimizerParams::Kind::kAdagrad;
      break;
    case OptimizerConfig::ADAM:
      params.kind = OptimizerParams::Kind::kAdam;
      break;
    case OptimizerConfig::ADAMW:
      params.kind = OptimizerParams::Kind::kAdamW;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer.kind is ", OptimizerConfig::Kind_Name(proto.kind()),
          "; use one of SGD, MOMENTUM, ADAGRAD, ADAM, ADAMW"));
  }
  if (proto.has_momentum()) params.momentum = proto.momentum();
  params.nesterov = proto.nesterov();
  if (proto.has_initial_accumulator_value()) {
    params.initial_accumulator_value = proto.initial_accumulator_value();
  }
  if (proto.has_beta1()) params.beta1 = proto.beta1();
  if (proto.has_beta2()) params.beta2 = proto.beta2();
  if (proto.has_epsilon()) params.epsilon = proto.epsilon();
  params.weight_decay = proto.weight_decay();
  return params;
}

absl::StatusOr<LrScheduleConfig> LrScheduleFromProto(
    const LearningRateSchedule& proto) {
  LrScheduleConfig config;
  switch (proto.kind()) {
    case LearningRateSchedule::KIND_UNSPECIFIED:
    case LearningRateSchedule::CONSTANT:
      config.kind = LrScheduleConfig::Kind::kConstant;
      break;
    case LearningRateSchedule::EXPONENTIAL_DECAY:
      config.kind = LrScheduleConfig::Kind::kExponential;
      break;
    case LearningRateSchedule::COSINE_DECAY:
      config.kind = LrScheduleConfig::Kind::kCosine;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "learning_rate.kind ", static_cast<int>(proto.kind()),
          " is unknown; use CONSTANT, EXPONENTIAL_DECAY or COSINE_DECAY"));
  }
  config.learning_rate = proto.learning_rate();
  config.decay_steps = proto.decay_steps();
  config.decay_rate = proto.decay_rate();
  config.staircase = proto.staircase();
  config.alpha = proto.alpha();
  config.warmup_steps = proto.warmup_steps();
  return config;
}

}  // namespace psflow
