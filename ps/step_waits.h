// Waiting, for a SYNC checkpoint, until everything it saves reached the
// held step: chunks of dense variables (shard_checkpoint.cc) and embedding
// tables (table_checkpoint.cc) alike. Not part of the server's interface.
#ifndef PSFLOW_PS_STEP_WAITS_H_
#define PSFLOW_PS_STEP_WAITS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psflow {

// One thing waited for: registers `ready` for when it reaches the step
// (nullopt, never calling it, when it is there already), and withdraws a
// registration.
struct StepWait {
  std::function<std::optional<uint64_t>(std::function<void()> ready)>
      register_wait;
  std::function<void(uint64_t id)> cancel;
};

// Blocks until every wait fired, polling `cancelled` (may be null) every
// 100 ms. Cancelled when it says so, DeadlineExceeded naming `what` and
// `step` at `deadline`; either way the waits still registered are
// withdrawn.
absl::Status AwaitStep(const std::vector<StepWait>& waits, int64_t step,
                       absl::string_view what, absl::Time deadline,
                       const std::function<bool()>& cancelled);

}  // namespace psflow

#endif  // PSFLOW_PS_STEP_WAITS_H_
