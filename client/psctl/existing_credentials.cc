#include "client/psctl/existing_credentials.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/job_tokens.h"
#include "common/rpc/rpc_role.h"

namespace psflow {

absl::Status RefuseToReplaceCredentials(const std::string& dir,
                                        const std::vector<std::string>& names,
                                        absl::string_view what) {
  std::vector<std::string> found;
  for (const std::string& name : names) {
    struct stat st;
    if (lstat(absl::StrCat(dir, "/", name).c_str(), &st) == 0) {
      found.push_back(name);
    }
  }
  if (found.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      dir, " already holds ", what, " (", absl::StrJoin(found, ", "),
      "); new ones would lock out every task started with them. Pass "
      "--overwrite to replace them, or name another --out"));
}

std::vector<std::string> JobTokenFiles() {
  std::vector<std::string> names = {std::string(kTokenDigestsFile)};
  for (RpcRole role : kAllRpcRoles) names.push_back(TokenFileName(role));
  return names;
}

}  // namespace psflow
