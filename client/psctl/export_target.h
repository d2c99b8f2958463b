// Where `psctl ckpt export` may write its file: never over something that
// is not a regular file (a device, a FIFO, a directory, a link), never
// over an existing file unless the operator said --overwrite, and never
// inside the checkpoint it reads (which the export would damage).
#ifndef PSFLOW_CLIENT_PSCTL_EXPORT_TARGET_H_
#define PSFLOW_CLIENT_PSCTL_EXPORT_TARGET_H_

#include <string>

#include "absl/status/status.h"

namespace psflow {

// OK when `out_path` may receive the export of `checkpoint` (a
// ckpt-<step> directory); FailedPrecondition naming the problem and the
// fix otherwise.
absl::Status CheckExportTarget(const std::string& checkpoint,
                               const std::string& out_path, bool overwrite);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_EXPORT_TARGET_H_
