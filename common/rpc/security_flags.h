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
//   --allow_unauthenticated_callers
//                      serve callers without a certificate or a token
//   --bind_host=HOST   the interface to listen on
//
// Secure unless told otherwise: a role binary given neither TLS files nor
// a token folder refuses to start, naming `psctl certs gen`, `psctl
// tokens gen` and the flags, unless --allow_unauthenticated_callers says
// so; then it listens on 127.0.0.1 unless --bind_host names another
// interface, and warns. TF_CONFIG's "rpc_layer": "grpc+tls" makes TLS
// mandatory whatever the flags say.
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
  // --allow_unauthenticated_callers.
  bool allow_unauthenticated = false;
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
  // The host peers dial it at (TF_CONFIG's): its certificate must cover
  // it. Empty for a tool that serves nothing (psctl).
  std::string host;
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

// Whether callers must prove who they are: mutual TLS or job tokens.
bool AuthenticatesCallers(const TransportSecurity& security);

// FailedPrecondition, naming `task`, the commands that make credentials
// and the flags, when `security` authenticates nobody and `settings` do
// not allow it.
absl::Status RefuseUnauthenticated(const SecuritySettings& settings,
                                   const TransportSecurity& security,
                                   const std::string& task);

// Where a task listens by default: every interface with TLS, else loopback
// only (without TLS, job tokens would cross the network in plaintext), in
// the address family of `own_address` (TF_CONFIG's host:port for the task;
// "[::1]:2222" listens on ::1, not 127.0.0.1).
std::string DefaultBindHost(const TransportSecurity& security,
                            const std::optional<std::string>& own_address);

// ResolveTransportSecurity(SecuritySettingsFromFlags(), the task, its
// rpc_layer), refusing an unauthenticated task unless allowed, and
// logging the mode (and the warning when open).
absl::StatusOr<TransportSecurity> TransportSecurityFromFlags(
    const TfConfig& tf_config);

// --bind_host, or DefaultBindHost(security, the task's address) when it is
// not given.
std::string BindHostFromFlags(const TransportSecurity& security,
                              const TfConfig& tf_config);

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_SECURITY_FLAGS_H_
