// Names that become one component of a file path: the job's name (its
// TensorBoard and event-file folders are <log_dir>/<job>/<task>), a task's
// name, an embedding table's name. They arrive from job configs and from
// the network, so they are checked before any path is joined from them.
//
// The rule: 1 to 128 bytes of ASCII letters, digits, '.', '_' and '-',
// and not "." or "..". So no separator, no parent step, no control
// character and nothing a shell or a file system treats specially.
#ifndef PSFLOW_COMMON_PATH_NAME_H_
#define PSFLOW_COMMON_PATH_NAME_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psflow {

inline constexpr int kMaxPathNameBytes = 128;

// OK when `name` keeps the rule above; else InvalidArgument naming `what`
// ("the job name"), the offending character (escaped) and the rule.
absl::Status CheckPathName(absl::string_view name, absl::string_view what);

}  // namespace psflow

#endif  // PSFLOW_COMMON_PATH_NAME_H_
