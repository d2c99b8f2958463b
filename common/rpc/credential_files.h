// Credential files checked as ssh checks its keys, before they are read: a
// secret (a private key, a job token) that other users could read, or any
// credential (a certificate, the token digests) they could change, is
// refused at start with the file, its mode and the command that fixes it.
//
//   secret   owned by this process's user or root; no access for others;
//            group access, read only, when the group is this process's own
//            (its effective group; for a root-owned file also one of its
//            supplementary groups: Kubernetes mounts Secrets root-owned,
//            mode 0440, group the pod's fsGroup);
//   public   owned by this process's user or root; not writable by group
//            or others;
//   folder   the file's folder: owned by this process's user or root, not
//            writable by group or others unless sticky (a Kubernetes
//            Secret volume's root is a sticky tmpfs folder, in which no one
//            else can replace this user's files).
//
// Symbolic links are followed (Secret volumes are made of them): what is
// checked is what would be read, and the folders of both the link and
// what it names.
#ifndef PSFLOW_COMMON_RPC_CREDENTIAL_FILES_H_
#define PSFLOW_COMMON_RPC_CREDENTIAL_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psflow {

enum class CredentialKind { kSecret, kPublic };

// OK when `path` and its folder keep the rules above. PermissionDenied
// naming `what` ("the worker token"), the path, its mode and the fix;
// NotFound when it does not exist.
absl::Status CheckCredentialFile(const std::string& path, CredentialKind kind,
                                 absl::string_view what);

// The folder rule alone, for a credential folder named by a flag.
absl::Status CheckCredentialFolder(const std::string& dir,
                                   absl::string_view what);

// A folder to write secrets into: `dir` created with its missing parents,
// mode 0700; one that exists is left as it is, and must belong to this
// user and be writable by no one else (PermissionDenied naming the fix).
absl::Status MakePrivateDirectory(const std::string& dir);

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_CREDENTIAL_FILES_H_
