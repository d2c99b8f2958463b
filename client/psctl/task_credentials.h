// One folder per task holding only the credentials that task reads, for
// copying to its host: a host broken into then gives away its own task's
// key and its role's token, not the CA's key (which makes certificates),
// the other tasks' keys, or the admin token.
//
//   <out>/<task>/tls/ca.crt, <task>.crt, <task>.key
//   <out>/<task>/tokens/<role>.token   (every role that calls others)
//   <out>/<task>/tokens/tokens.sha256  (the roles that check callers:
//                                       parameter servers and the chief)
//
// The task starts with --tls_dir=<out>/<task>/tls
// --token_dir=<out>/<task>/tokens.
#ifndef PSFLOW_CLIENT_PSCTL_TASK_CREDENTIALS_H_
#define PSFLOW_CLIENT_PSCTL_TASK_CREDENTIALS_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "common/rpc/rpc_role.h"
#include "common/tf_config.h"

namespace psflow {

// Writes a folder per task of `config`'s cluster into `out`, from the
// job's certificates in `tls_dir` (psctl certs gen) and its `tokens`.
// Keys and tokens 0600, folders 0700.
absl::Status WriteTaskCredentials(const TfConfig& config,
                                  const std::string& tls_dir,
                                  const std::map<RpcRole, std::string>& tokens,
                                  const std::string& out);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_TASK_CREDENTIALS_H_
