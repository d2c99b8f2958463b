// A job's credentials are made once: `psctl certs gen` and `psctl tokens
// gen` into a folder that already holds a job's refuse to replace them
// unless told (--overwrite), since new ones lock out every task started
// with the old.
#ifndef PSFLOW_CLIENT_PSCTL_EXISTING_CREDENTIALS_H_
#define PSFLOW_CLIENT_PSCTL_EXISTING_CREDENTIALS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psflow {

// OK when none of `names` exists in `dir` (or `dir` does not exist);
// FailedPrecondition naming those that do, `what` they are ("a job's
// tokens"), and the two ways on otherwise.
absl::Status RefuseToReplaceCredentials(const std::string& dir,
                                        const std::vector<std::string>& names,
                                        absl::string_view what);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_EXISTING_CREDENTIALS_H_
