// Keeps the files a process reads and writes for its peers under one root
// directory: a parameter server saves and restores checkpoint files only
// under its --checkpoint_root, whatever path a request names.
//
// A path is accepted when it is absolute, has no "." or ".." components,
// lies under the root, and resolves (symlinks followed) to a place under
// the root's own resolved location: a symlink inside the root that points
// out is refused. For a file to be created, its directory is resolved and
// the file itself is created without following a symlink (O_EXCL).
//
// What remains: a process that can write under the root can still swap a
// directory for a symlink between this check and the open; the root should
// be writable only by the job.
//
// Immutable after Create; thread-safe.
#ifndef PSFLOW_COMMON_CONFINED_PATH_H_
#define PSFLOW_COMMON_CONFINED_PATH_H_

#include <string>

#include "absl/status/statusor.h"

namespace psflow {

class PathConfinement {
 public:
  // Creates `root` (and its parents) when missing. InvalidArgument for a
  // relative root; the error of mkdir/realpath otherwise.
  static absl::StatusOr<PathConfinement> Create(const std::string& root,
                                                std::string flag_name);

  // The path to open for `path`, or PermissionDenied naming the path, the
  // root and the flag. `exists`: the file must exist (read) rather than be
  // about to be created (write).
  absl::StatusOr<std::string> Check(const std::string& path, bool exists) const;

  const std::string& root() const { return root_; }
  // The root with symlinks resolved ("/" confines nothing).
  const std::string& resolved_root() const { return resolved_root_; }

 private:
  PathConfinement(std::string root, std::string resolved, std::string flag)
      : root_(std::move(root)),
        resolved_root_(std::move(resolved)),
        flag_(std::move(flag)) {}

  absl::Status Outside(const std::string& path, const std::string& why) const;

  std::string root_;           // as given
  std::string resolved_root_;  // realpath
  std::string flag_;           // e.g. "--checkpoint_root"
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_CONFINED_PATH_H_
