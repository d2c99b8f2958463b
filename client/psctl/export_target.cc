#include "client/psctl/export_target.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

// `path` with every symlink resolved, or nullopt when it cannot be (it
// does not exist yet).
std::optional<std::string> Resolved(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return std::nullopt;
  return std::string(resolved);
}

}  // namespace

absl::Status CheckExportTarget(const std::string& checkpoint,
                               const std::string& out_path, bool overwrite) {
  RETURN_IF_ERROR(CheckReplaceableFile(out_path));
  struct stat st;
  if (lstat(out_path.c_str(), &st) == 0 && !overwrite) {
    return absl::FailedPreconditionError(
        absl::StrCat(out_path,
                     " exists; pass --overwrite to replace it, or name "
                     "another --out"));
  }
  // Written into the checkpoint it reads, the export would replace one of
  // the checkpoint's own files, or leave a stray one that its checks count.
  const std::optional<std::string> source = Resolved(checkpoint);
  const std::optional<std::string> out_dir =
      Resolved(DirName(AbsolutePath(out_path)));
  if (source.has_value() && out_dir.has_value() &&
      (*out_dir == *source || absl::StartsWith(*out_dir, *source + "/"))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--out=", out_path, " lies inside the checkpoint being exported (",
        checkpoint,
        "), whose files it would damage; write the export outside it"));
  }
  return absl::OkStatus();
}

}  // namespace psflow
