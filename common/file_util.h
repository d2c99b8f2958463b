// Small filesystem helpers.
#ifndef PSFLOW_COMMON_FILE_UTIL_H_
#define PSFLOW_COMMON_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"

namespace psflow {

// `mkdir -p`: creates `path` and its missing parents.
absl::Status MakeDirectories(const std::string& path);

}  // namespace psflow

#endif  // PSFLOW_COMMON_FILE_UTIL_H_
