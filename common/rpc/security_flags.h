// The transport-security flags every role binary shares, and how they
// become a TransportSecurity:
//
//   --transport_security=insecure|mtls  (default: mtls when TLS files are
//                                        given, else insecure)
//   --tls_dir=DIR      ca.crt, <task>.crt and <task>.key of `psctl certs
//                      gen` (a mounted Kubernetes Secret); $PSFLOW_TLS_DIR
//   --tls_ca, --tls_cert, --tls_key
//                      the files one by one (override --tls_dir);
//                      $PSFLOW_TLS_CA, $PSFLOW_TLS_CERT, $PSFLOW_TLS_KEY
//   --token_dir=DIR    the job's tokens (`psctl tokens gen`; job_tokens.h):
//                      <role>.token to present, tokens.sha256 to check
//                      callers (parameter servers and the chief);
//                      $PSFLOW_TOKEN_DIR
//
// TF_CONFIG's "rpc_layer": "grpc+tls" makes TLS mandatory: a task started
// without credentials refuses to start. Insecure processes log one warning
// that the job is open to anyone who reaches its ports (without TLS and
// without tokens).
#ifndef PSFLOW_COMMON_RPC_SECURITY_FLAGS_H_
#define PSFLOW_COMMON_RPC_SECURITY_FLAGS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/rpc_role.h"
#include "common/rpc/transport_security.h"
#include "common/tf_config.h"

namespace psflow {

// What the flags (or their environment variables) say.
struct SecuritySettings {
  std::string mode;  // "", "insecure" or "mtls"
  std::string tls_dir;
  std::string ca, cert, key;
  std::string token_dir;
};

// From this binary's flags, environment variables filling the empty ones.
SecuritySettings SecuritySettingsFromFlags();

// `settings` with the empty fields taken from $PSFLOW_TLS_DIR,
// $PSFLOW_TLS_CA, $PSFLOW_TLS_CERT, $PSFLOW_TLS_KEY and $PSFLOW_TOKEN_DIR
// (for tools that parse their own flags).
SecuritySettings WithEnvironmentDefaults(SecuritySettings settings);

// Who is resolving credentials: the task's name ("worker-1"; psctl uses
// "psctl"), its role and the job's chief task.
struct SecurityIdentity {
  std::string name;
  RpcRole role = RpcRole::kWorker;
  TaskId chief_task{TaskType::kChief, 0};
};

// The credentials of `identity` under `settings`; `rpc_layer` is
// TF_CONFIG's. InvalidArgument for an unknown mode, TLS asked for without
// files, or files that do not fit together; NotFound for a missing token
// file. Parameter servers and the chief load the token digests to check
// callers.
absl::StatusOr<TransportSecurity> ResolveTransportSecurity(
    const SecuritySettings& settings, const SecurityIdentity& identity,
    const std::string& rpc_layer);

// ResolveTransportSecurity(SecuritySettingsFromFlags(), the task, its
// rpc_layer), logging the mode (and the warning when open).
absl::StatusOr<TransportSecurity> TransportSecurityFromFlags(
    const TfConfig& tf_config);

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_SECURITY_FLAGS_H_
