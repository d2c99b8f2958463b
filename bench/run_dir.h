// A benchmark run's folder under /tmp (its servers' logs, its job files):
// removed once the run succeeds, kept and named when it fails, so that
// the logs that explain the failure are there to read.
#ifndef PSFLOW_BENCH_RUN_DIR_H_
#define PSFLOW_BENCH_RUN_DIR_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::bench {

// A new, empty /tmp/<prefix>.XXXXXX.
absl::StatusOr<std::string> MakeRunDir(absl::string_view prefix);

// Removes `dir` when `exit_code` is 0; otherwise says on stderr where its
// logs are. Returns `exit_code`.
int FinishRunDir(const std::string& dir, int exit_code);

}  // namespace psflow::bench

#endif  // PSFLOW_BENCH_RUN_DIR_H_
