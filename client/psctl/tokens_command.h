// `psctl tokens gen`: a job's access tokens (common/rpc/job_tokens.h), one
// per calling role, the digests servers check them against, and the
// Kubernetes Secret that carries them.
#ifndef PSFLOW_CLIENT_PSCTL_TOKENS_COMMAND_H_
#define PSFLOW_CLIENT_PSCTL_TOKENS_COMMAND_H_

#include <map>
#include <memory>
#include <string>

#include "client/psctl/job_certificates.h"
#include "client/psctl/subcommand.h"
#include "common/rpc/rpc_role.h"

namespace psflow {

std::unique_ptr<Subcommand> NewTokensGenCommand();

// The Kubernetes Secret (YAML) with every task role's token and the
// digests; not admin.token, which operators keep.
std::string JobTokensSecret(const std::map<RpcRole, std::string>& tokens,
                            const SecretOptions& secret);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_TOKENS_COMMAND_H_
