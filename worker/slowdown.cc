#include "worker/slowdown.h"

#include <algorithm>
#include <cstdint>

namespace psflow {

bool Slowdown::SlowAt(absl::Time now, int worker, int num_workers) const {
  if (factor <= 1) return false;
  if (period <= absl::ZeroDuration()) return true;
  const int64_t turn =
      absl::ToUnixNanos(now) / absl::ToInt64Nanoseconds(period);
  return turn % std::max(1, num_workers) == worker;
}

absl::Duration Slowdown::Delay(absl::Time now, absl::Duration compute,
                               int worker, int num_workers) const {
  if (!SlowAt(now, worker, num_workers)) return absl::ZeroDuration();
  return compute * (factor - 1);
}

}  // namespace psflow
