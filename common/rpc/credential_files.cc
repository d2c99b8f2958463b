#include "common/rpc/credential_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

std::string Mode(mode_t mode) {
  return absl::StrFormat("%04o", static_cast<unsigned>(mode & 07777));
}

absl::StatusOr<struct stat> Stat(const std::string& path,
                                 absl::string_view what) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int error = errno;
    const std::string message = absl::StrCat("cannot read ", what, " ", path,
                                             ": ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message)
                           : absl::PermissionDeniedError(message);
  }
  return st;
}

absl::Status CheckOwner(const struct stat& st, const std::string& path,
                        absl::string_view what) {
  if (st.st_uid == geteuid() || st.st_uid == 0) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, " ", path, " belongs to another user (uid ", st.st_uid,
                   "; this process runs as uid ", geteuid(),
                   "), who could change it: chown it to this user or root"));
}

// Whether the file's group is this process's alone to read through: its
// effective group, or, for a root-owned file (Kubernetes projects Secrets
// root-owned with the pod's fsGroup, a supplementary group when the pod
// sets no runAsGroup), one of its supplementary groups.
bool OwnGroup(const struct stat& st) {
  if (st.st_gid == getegid()) return true;
  if (st.st_uid != 0) return false;
  gid_t groups[256];
  const int n = getgroups(256, groups);
  for (int i = 0; i < n; ++i) {
    if (groups[i] == st.st_gid) return true;
  }
  return false;
}

std::string Folder(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::Status CheckCredentialFolder(const std::string& dir,
                                   absl::string_view what) {
  absl::StatusOr<struct stat> st = Stat(dir, what);
  if (!st.ok()) return st.status();
  if (!S_ISDIR(st->st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", dir, " is not a folder"));
  }
  if (absl::Status owner = CheckOwner(*st, dir, what); !owner.ok()) {
    return owner;
  }
  const bool sticky = (st->st_mode & S_ISVTX) != 0;
  if ((st->st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, " ", dir, " is writable by other users (mode ", Mode(st->st_mode),
        "), who could put their own credentials in it: chmod go-w ", dir,
        " (psctl certs gen and psctl tokens gen make it 0700)"));
  }
  return absl::OkStatus();
}

absl::Status CheckCredentialFile(const std::string& path, CredentialKind kind,
                                 absl::string_view what) {
  absl::StatusOr<struct stat> st = Stat(path, what);
  if (!st.ok()) return st.status();
  if (absl::Status owner = CheckOwner(*st, path, what); !owner.ok()) {
    return owner;
  }
  const mode_t mode = st->st_mode;
  if (kind == CredentialKind::kSecret) {
    const bool others = (mode & S_IRWXO) != 0;
    const bool group_writes = (mode & (S_IWGRP | S_IXGRP)) != 0;
    const bool foreign_group_reads = (mode & S_IRGRP) != 0 && !OwnGroup(*st);
    if (others || group_writes || foreign_group_reads) {
      return absl::PermissionDeniedError(absl::StrCat(
          what, " ", path, " is open to other users (mode ", Mode(mode),
          "): anyone who can read it can act as this task. chmod 600 ", path,
          " (ssh refuses such keys too)"));
    }
  } else if ((mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " ", path, " is writable by other users (mode ",
                     Mode(mode), "), who could replace it: chmod go-w ", path));
  }
  RETURN_IF_ERROR(CheckCredentialFolder(Folder(path),
                                        absl::StrCat("the folder of ", what)));
  // A link is checked where it points too: whoever may replace the file
  // it names may replace the credential.
  char real[PATH_MAX];
  if (realpath(path.c_str(), real) != nullptr && Folder(real) != Folder(path)) {
    RETURN_IF_ERROR(CheckCredentialFolder(
        Folder(real), absl::StrCat("the folder of ", what, " (", path,
                                   " links to ", real, ")")));
  }
  return absl::OkStatus();
}

absl::Status MakePrivateDirectory(const std::string& given) {
  // "dir/" and "dir/." name dir: stripped, so the folder made is the one
  // checked, and created 0700 (not by MakeDirectories as a parent).
  std::string dir = given;
  while (dir.size() > 1 && (absl::EndsWith(dir, "/") ||
                            (absl::EndsWith(dir, "/.") && dir.size() > 2))) {
    dir.resize(dir.size() - (absl::EndsWith(dir, "/") ? 1 : 2));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    const size_t slash = dir.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
      RETURN_IF_ERROR(MakeDirectories(dir.substr(0, slash)));
    }
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
    }
    if (stat(dir.c_str(), &st) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read ", dir, ": ", std::strerror(errno)));
    }
  }
  // A folder that was there is never loosened or tightened (it may be
  // shared: /tmp); it must already keep others from replacing what is
  // written into it.
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " is not a folder; name a folder for the secrets"));
  }
  if (st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat(
        dir, " belongs to another user (uid ", st.st_uid,
        "), who could read or replace the secrets written into it; name a "
        "folder of this user's own (a new one is created mode 0700)"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    // A shared sticky folder (/tmp) stays shared: no chmod is suggested.
    const bool shared = (st.st_mode & S_ISVTX) != 0;
    return absl::PermissionDeniedError(absl::StrCat(
        dir, " is writable by other users (mode ", Mode(st.st_mode),
        "), who could replace the secrets written into it; name a folder of "
        "this user's own (a new one is created mode 0700)",
        shared ? "" : absl::StrCat(", or chmod go-w ", dir)));
  }
  return absl::OkStatus();
}

}  // namespace psflow
