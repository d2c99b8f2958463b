#include "ps/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace psflow {

absl::StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleConfig& config) {
  absl::Status valid = ValidateLrScheduleConfig(config);
  if (!valid.ok()) return valid;
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
