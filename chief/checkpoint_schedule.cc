#include "chief/checkpoint_schedule.h"

#include <algorithm>

namespace psflow {

CheckpointSchedule::CheckpointSchedule(const CheckpointConfig& config,
                                       int64_t start_step, absl::Time now)
    : every_steps_(config.save_every_steps()),
      every_(absl::Seconds(config.save_every_secs())),
      last_step_(std::max<int64_t>(start_step, 0)),
      last_time_(now) {}

bool CheckpointSchedule::Due(int64_t global_step, absl::Time now) const {
  if (global_step <= last_step_) return false;
  // At each multiple of every_steps_ after the last save: a save that came
  // late (the chief looks a few times a second, while async training runs
  // on) does not push the later ones back, so no fault costs more than one
  // interval of training.
  if (every_steps_ > 0 &&
      global_step >= (last_step_ / every_steps_ + 1) * every_steps_) {
    return true;
  }
  return every_ > absl::ZeroDuration() && now - last_time_ >= every_;
}

int64_t CheckpointSchedule::NextStep() const {
  return every_steps_ > 0 ? (last_step_ / every_steps_ + 1) * every_steps_ : 0;
}

void CheckpointSchedule::Saved(int64_t step, absl::Time now) {
  last_step_ = std::max(last_step_, step);
  last_time_ = now;
}

}  // namespace psflow
