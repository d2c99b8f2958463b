#include "common/confined_path.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace psflow {
namespace {

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    const int error = errno;
    return error == ENOENT
               ? absl::NotFoundError(absl::StrCat(path, " does not exist"))
               : absl::FailedPreconditionError(absl::StrCat(
                     "cannot resolve ", path, ": ", std::strerror(error)));
  }
  return std::string(resolved);
}

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return absl::StartsWith(path, "/");
  return path == root || absl::StartsWith(path, root + "/");
}

}  // namespace

absl::StatusOr<PathConfinement> PathConfinement::Create(const std::string& root,
                                                        std::string flag_name) {
  if (root.empty() || root[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        flag_name, "=", root, " is not an absolute directory path"));
  }
  // The root must be a directory this process can write checkpoints into.
  struct stat st;
  if (stat(root.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag_name, "=", root,
                     " is not a directory; name the directory the "
                     "job's checkpoints go under"));
  }
  if (absl::Status made = MakeDirectories(root); !made.ok()) return made;
  absl::StatusOr<std::string> resolved = RealPath(root);
  if (!resolved.ok()) return resolved.status();
  if (access(resolved->c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag_name, "=", root, " is not writable by this process (",
                     std::strerror(errno),
                     "); name a directory it may write checkpoints into"));
  }
  return PathConfinement(root, *std::move(resolved), std::move(flag_name));
}

absl::Status PathConfinement::Outside(const std::string& path,
                                      const std::string& why) const {
  return absl::PermissionDeniedError(absl::StrCat(
      "checkpoint path \"", path, "\" ", why,
      "; this server reads and "
      "writes checkpoints only under ",
      root_, " (", flag_,
      "): point the job's checkpoint.directory there, or start the server "
      "with ",
      flag_, " naming the job's checkpoint directory"));
}

absl::StatusOr<std::string> PathConfinement::Check(const std::string& path,
                                                   bool exists) const {
  if (path.empty() || path[0] != '/') {
    return Outside(path, "is not absolute");
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "." || part == "..") {
      return Outside(path, "has a \".\" or \"..\" component");
    }
  }
  if (!IsUnder(path, root_) && !IsUnder(path, resolved_root_)) {
    return Outside(path, "is outside the checkpoint root");
  }
  // Where it really is, symlinks followed: the file itself when it must
  // exist, else its directory (the file is created with O_EXCL, which does
  // not follow a symlink).
  const size_t slash = path.find_last_of('/');
  const std::string name = path.substr(slash + 1);
  if (name.empty()) return Outside(path, "names a directory, not a file");
  absl::StatusOr<std::string> resolved =
      exists ? RealPath(path)
             : RealPath(slash == 0 ? "/" : path.substr(0, slash));
  if (!resolved.ok()) {
    if (absl::IsNotFound(resolved.status())) {
      return absl::NotFoundError(absl::StrCat(
          "checkpoint path \"", path, "\": ", resolved.status().message()));
    }
    return resolved.status();
  }
  const std::string real =
      exists ? *resolved : absl::StrCat(*resolved, "/", name);
  if (!IsUnder(real, resolved_root_) || real == resolved_root_) {
    return Outside(path,
                   absl::StrCat("leads through a symbolic link to ", real));
  }
  return real;
}

}  // namespace psflow
