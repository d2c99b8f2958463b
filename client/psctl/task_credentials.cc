#include "client/psctl/task_credentials.h"

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/rpc/credential_files.h"
#include "common/rpc/job_tokens.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

absl::Status CopyFile(const std::string& from, const std::string& to,
                      int mode) {
  ASSIGN_OR_RETURN(const std::string content,
                   ReadFileToString(from, int64_t{1} << 20));
  return WriteFileWithMode(to, content, mode);
}

}  // namespace

absl::Status WriteTaskCredentials(const TfConfig& config,
                                  const std::string& tls_dir,
                                  const std::map<RpcRole, std::string>& tokens,
                                  const std::string& out) {
  const TaskId chief = config.ChiefTask();
  for (const auto& [task, address] : config.cluster.Tasks()) {
    const std::string name = task.ToString();
    const std::string dir = absl::StrCat(out, "/", name);
    RETURN_IF_ERROR(MakePrivateDirectory(dir));
    const std::string tls = dir + "/tls";
    RETURN_IF_ERROR(MakePrivateDirectory(tls));
    RETURN_IF_ERROR(
        CopyFile(tls_dir + "/ca.crt", tls + "/ca.crt", /*mode=*/0644));
    RETURN_IF_ERROR(CopyFile(absl::StrCat(tls_dir, "/", name, ".crt"),
                             absl::StrCat(tls, "/", name, ".crt"), 0644));
    RETURN_IF_ERROR(CopyFile(absl::StrCat(tls_dir, "/", name, ".key"),
                             absl::StrCat(tls, "/", name, ".key"), 0600));

    RETURN_IF_ERROR(
        WriteRoleTokens(tokens, RoleOfTask(task, chief), dir + "/tokens"));
  }
  return absl::OkStatus();
}

}  // namespace psflow
