#include "common/job/update_rule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

absl::Status Invalid(absl::string_view field, double value,
                     absl::string_view fix) {
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer: ", field, " is ", value, "; ", fix));
}

absl::Status CheckFraction(absl::string_view field, double value) {
  if (value >= 0 && value < 1) return absl::OkStatus();
  return Invalid(field, value, "use a value in [0, 1)");
}

absl::Status CheckEpsilon(double epsilon) {
  if (epsilon > 0 && std::isfinite(epsilon)) return absl::OkStatus();
  return Invalid("epsilon", epsilon, "use a small positive number like 1e-7");
}

absl::Status InvalidSchedule(absl::string_view field, double value,
                             absl::string_view fix) {
  return absl::InvalidArgumentError(absl::StrCat(
      "learning-rate schedule: ", field, " is ", value, "; ", fix));
}

}  // namespace

const char* OptimizerKindName(OptimizerParams::Kind kind) {
  switch (kind) {
    case OptimizerParams::Kind::kSgd:
      return "sgd";
    case OptimizerParams::Kind::kMomentum:
      return "momentum";
    case OptimizerParams::Kind::kAdagrad:
      return "adagrad";
    case OptimizerParams::Kind::kAdam:
      return "adam";
    case OptimizerParams::Kind::kAdamW:
      return "adamw";
    case OptimizerParams::Kind::kFtrl:
      return "ftrl";
  }
  return "unknown";
}

absl::Status ValidateOptimizerParams(const OptimizerParams& c) {
  using Kind = OptimizerParams::Kind;
  switch (c.kind) {
    case Kind::kSgd:
      return absl::OkStatus();
    case Kind::kMomentum: {
      absl::Status s = CheckFraction("momentum", c.momentum);
      if (!s.ok()) return s;
      return absl::OkStatus();
    }
    case Kind::kAdagrad: {
      if (!(c.initial_accumulator_value >= 0) ||
          !std::isfinite(c.initial_accumulator_value)) {
        return Invalid("initial_accumulator_value", c.initial_accumulator_value,
                       "use 0 or more, e.g. 0.1");
      }
      absl::Status s = CheckEpsilon(c.epsilon);
      if (!s.ok()) return s;
      return absl::OkStatus();
    }
    case Kind::kAdam:
    case Kind::kAdamW: {
      for (absl::Status s :
           {CheckFraction("beta1", c.beta1), CheckFraction("beta2", c.beta2),
            CheckEpsilon(c.epsilon)}) {
        if (!s.ok()) return s;
      }
      if (c.kind == Kind::kAdamW) {
        if (!(c.weight_decay >= 0) || !std::isfinite(c.weight_decay)) {
          return Invalid("weight_decay", c.weight_decay,
                         "use 0 or more, e.g. 0.01");
        }
      } else if (c.weight_decay != 0) {
        return Invalid("weight_decay", c.weight_decay,
                       "adam takes no weight decay; use adamw for decoupled "
                       "weight decay");
      }
      return absl::OkStatus();
    }
    case Kind::kFtrl: {
      if (!(c.initial_accumulator_value > 0) ||
          !std::isfinite(c.initial_accumulator_value)) {
        return Invalid("initial_accumulator_value", c.initial_accumulator_value,
                       "ftrl needs a positive value, e.g. 0.1");
      }
      if (!(c.l1 >= 0) || !std::isfinite(c.l1)) {
        return Invalid("l1", c.l1, "use 0 or more, e.g. 0.001");
      }
      if (!(c.l2 >= 0) || !std::isfinite(c.l2)) {
        return Invalid("l2", c.l2, "use 0 or more, e.g. 0.001");
      }
      if (!(c.learning_rate_power <= 0) ||
          !std::isfinite(c.learning_rate_power)) {
        return Invalid("learning_rate_power", c.learning_rate_power,
                       "use 0 or less, e.g. -0.5");
      }
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError("optimizer: unknown kind");
}

absl::Status ValidateLrScheduleConfig(const LrScheduleConfig& config) {
  if (!(config.learning_rate > 0) || !std::isfinite(config.learning_rate)) {
    return InvalidSchedule("learning_rate", config.learning_rate,
                           "use a positive finite number such as 0.01");
  }
  if (config.warmup_steps < 0) {
    return InvalidSchedule("warmup_steps", config.warmup_steps,
                           "use 0 or more");
  }
  switch (config.kind) {
    case LrScheduleConfig::Kind::kConstant:
      break;
    case LrScheduleConfig::Kind::kExponential:
      if (config.decay_steps <= 0) {
        return InvalidSchedule(
            "decay_steps", config.decay_steps,
            "exponential decay needs a positive number of steps");
      }
      if (!(config.decay_rate > 0) || !std::isfinite(config.decay_rate)) {
        return InvalidSchedule("decay_rate", config.decay_rate,
                               "use a positive number such as 0.96");
      }
      break;
    case LrScheduleConfig::Kind::kCosine:
      if (config.decay_steps <= 0) {
        return InvalidSchedule("decay_steps", config.decay_steps,
                               "cosine decay needs a positive number of steps");
      }
      if (!(config.alpha >= 0 && config.alpha <= 1)) {
        return InvalidSchedule("alpha", config.alpha,
                               "use a fraction in [0, 1]");
      }
      break;
  }
  return absl::OkStatus();
}

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
    case OptimizerConfig::FTRL:
      params.kind = OptimizerParams::Kind::kFtrl;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer.kind is ", OptimizerConfig::Kind_Name(proto.kind()),
          "; use one of SGD, MOMENTUM, ADAGRAD, ADAM, ADAMW, FTRL"));
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
  params.l1 = proto.l1();
  params.l2 = proto.l2();
  if (proto.has_learning_rate_power()) {
    params.learning_rate_power = proto.learning_rate_power();
  }
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
