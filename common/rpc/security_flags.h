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
//
// TF_CONFIG's "rpc_layer": "grpc+tls" makes TLS mandatory: a task started
// without credentials refuses to start. Insecure processes log one warning
// that the job is open to anyone who reaches its ports.
#ifndef PSFLOW_COMMON_RPC_SECURITY_FLAGS_H_
#define PSFLOW_COMMON_RPC_SECURITY_FLAGS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/transport_security.h"
#include "common/tf_config.h"

namespace psflow {

// What the flags (or their environment variables) say.
struct SecuritySettings {
  std::string mode;  // "", "insecure" or "mtls"
  std::string tls_dir;
  std::string ca, cert, key;
};

// From this binary's flags, environment variables filling the empty ones.
SecuritySettings SecuritySettingsFromFlags();

// `settings` with the empty fields taken from $PSFLOW_TLS_DIR,
// $PSFLOW_TLS_CA, $PSFLOW_TLS_CERT and $PSFLOW_TLS_KEY (for tools that
// parse their own flags).
SecuritySettings WithEnvironmentDefaults(SecuritySettings settings);

// The credentials of task `name` ("worker-1"; psctl uses "psctl") under
// `settings`; `rpc_layer` is TF_CONFIG's. InvalidArgument for an unknown
// mode, TLS asked for without files, or files that do not fit together.
absl::StatusOr<TransportSecurity> ResolveTransportSecurity(
    const SecuritySettings& settings, const std::string& name,
    const std::string& rpc_layer);

// ResolveTransportSecurity(SecuritySettingsFromFlags(), the task's name,
// its rpc_layer), logging the mode (and the warning when insecure).
absl::StatusOr<TransportSecurity> TransportSecurityFromFlags(
    const TfConfig& tf_config);

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_SECURITY_FLAGS_H_
