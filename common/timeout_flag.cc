#include "common/timeout_flag.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psflow {

absl::StatusOr<absl::Duration> ReadTimeoutFlag(absl::string_view name,
                                               double seconds,
                                               ZeroSeconds zero) {
  const bool never = zero == ZeroSeconds::kNever;
  if (seconds == 0 && never) return absl::InfiniteDuration();
  if (!std::isfinite(seconds) || seconds <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, "=", seconds, " is ",
        std::isfinite(seconds) ? (seconds < 0 ? "negative" : "zero")
                               : "not a number of seconds",
        never ? "; use a positive number of seconds, or 0 for never"
              : "; use a positive number of seconds"));
  }
  return absl::Seconds(seconds);
}

}  // namespace psflow
