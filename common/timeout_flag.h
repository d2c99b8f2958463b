// Reading a command-line flag of seconds (--startup_timeout_s and the like)
// into a Duration, refusing values that would make the timeout meaningless
// (a negative or non-finite one, or 0 where 0 is not "never") with the
// flag named, so that a process stops at startup instead of, say,
// declaring every peer lost at once.
#ifndef PSFLOW_COMMON_TIMEOUT_FLAG_H_
#define PSFLOW_COMMON_TIMEOUT_FLAG_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psflow {

// What 0 means for a timeout flag.
enum class ZeroSeconds {
  kNever,    // no timeout: 0 reads as absl::InfiniteDuration()
  kRefused,  // the timeout must be positive
};

// `seconds`, the value of --`name`, as a Duration. InvalidArgument naming
// --<name>=<value> and the accepted values when it is negative, not
// finite, or 0 under ZeroSeconds::kRefused.
absl::StatusOr<absl::Duration> ReadTimeoutFlag(absl::string_view name,
                                               double seconds,
                                               ZeroSeconds zero);

}  // namespace psflow

#endif  // PSFLOW_COMMON_TIMEOUT_FLAG_H_
