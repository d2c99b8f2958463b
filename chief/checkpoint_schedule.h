// When the chief saves a checkpoint: at every multiple of
// `save_every_steps` global steps (the first one reached after the last
// save, the start or the restored step), and/or every `save_every_secs`
// seconds after the last save (CheckpointConfig).
#ifndef PSFLOW_CHIEF_CHECKPOINT_SCHEDULE_H_
#define PSFLOW_CHIEF_CHECKPOINT_SCHEDULE_H_

#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/job_config.pb.h"

namespace psflow {

class CheckpointSchedule {
 public:
  // `start_step`: the restored step, or < 0 for a fresh start.
  CheckpointSchedule(const CheckpointConfig& config, int64_t start_step,
                     absl::Time now = absl::Now());

  // Whether a save is due at `global_step` and `now`. Never for a step
  // already saved.
  bool Due(int64_t global_step, absl::Time now) const;

  // The global step at which the next step-based save is due (0: saves are
  // not step-based).
  int64_t NextStep() const;

  // Records a save (or an attempt) at `step`.
  void Saved(int64_t step, absl::Time now);

 private:
  int64_t every_steps_;
  absl::Duration every_;
  int64_t last_step_;
  absl::Time last_time_;
};

}  // namespace psflow

#endif  // PSFLOW_CHIEF_CHECKPOINT_SCHEDULE_H_
