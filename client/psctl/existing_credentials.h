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

// What marks a folder as holding a job's tokens: the digests and every
// role's token file.
std::vector<std::string> JobTokenFiles();
// ... and a job's CA.
inline const std::vector<std::string>& JobCaFiles() {
  static const auto* const files =
      new std::vector<std::string>{"ca.crt", "ca.key"};
  return *files;
}

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_EXISTING_CREDENTIALS_H_
