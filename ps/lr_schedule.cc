#include "ps/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

absl::Status Invalid(absl::string_view field, double value,
                     absl::string_view fix) {
  return absl::InvalidArgumentError(absl::StrCat(
      "learning-rate schedule: ", field, " is ", value, "; ", fix));
}

}  // namespace

absl::StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleConfig& config) {
  if (!(config.learning_rate > 0) || !std::isfinite(config.learning_rate)) {
    return Invalid("learning_rate", config.learning_rate,
                   "use a positive finite number such as 0.01");
  }
  if (config.warmup_steps < 0) {
    return Invalid("warmup_steps", config.warmup_steps, "use 0 or more");
  }
  switch (config.kind) {
    case LrScheduleConfig::Kind::kConstant:
      break;
    case LrScheduleConfig::Kind::kExponential:
      if (config.decay_steps <= 0) {
        return Invalid("decay_steps", config.decay_steps,
                       "exponential decay needs a positive number of steps");
      }
      if (!(config.decay_rate > 0) || !std::isfinite(config.decay_rate)) {
        return Invalid("decay_rate", config.decay_rate,
                       "use a positive number such as 0.96");
      }
      break;
    case LrScheduleConfig::Kind::kCosine:
      if (config.decay_steps <= 0) {
        return Invalid("decay_steps", config.decay_steps,
                       "cosine decay needs a positive number of steps");
      }
      if (!(config.alpha >= 0 && config.alpha <= 1)) {
        return Invalid("alpha", config.alpha, "use a fraction in [0, 1]");
      }
      break;
  }
  return LrSchedule(config);
}

double LrSchedule::At(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  double lr = config_.learning_rate;
  switch (config_.kind) {
    case LrScheduleConfig::Kind::kConstant:
      break;
    case LrScheduleConfig::Kind::kExponential: {
      double exponent = static_cast<double>(step) / config_.decay_steps;
      if (config_.staircase) exponent = std::floor(exponent);
      lr *= std::pow(config_.decay_rate, exponent);
      break;
    }
    case LrScheduleConfig::Kind::kCosine: {
      const double progress =
          static_cast<double>(std::min(step, config_.decay_steps)) /
          config_.decay_steps;
      const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
      lr *= config_.alpha + (1.0 - config_.alpha) * cosine;
      break;
    }
  }
  if (step < config_.warmup_steps) {
    lr *= static_cast<double>(step + 1) / config_.warmup_steps;
  }
  return lr;
}

}  // namespace psflow
