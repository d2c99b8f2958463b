// The TLS flags of psctl's subcommands that talk to a running job (status,
// ckpt restore): psctl presents its own certificate (psctl.crt of `psctl
// certs gen`) and checks the job's servers against the job's CA.
//
//   --tls_dir=DIR (ca.crt, psctl.crt, psctl.key), or --tls_ca, --tls_cert,
//   --tls_key; --token_dir=DIR (admin.token of `psctl tokens gen`);
//   $PSFLOW_TLS_DIR, $PSFLOW_TOKEN_DIR and friends fill what the flags
//   leave empty.
#ifndef PSFLOW_CLIENT_PSCTL_TLS_FLAGS_H_
#define PSFLOW_CLIENT_PSCTL_TLS_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/psctl/flag_set.h"
#include "common/rpc/security_flags.h"
#include "common/rpc/transport_security.h"

namespace psflow {

// Registers --tls_dir, --tls_ca, --tls_cert, --tls_key and --token_dir on
// `flags`.
void AddTlsFlags(FlagSet& flags, SecuritySettings* settings);

// When `settings` (and the environment) name no credentials at all and
// `tf_config_flag` is a file: the job's folders beside it, where psctl
// local (<dir>/tf_config/<task>.json, <dir>/tls, <dir>/tokens) and psctl
// tfconfig gen --credentials (<out>/<task>.json, <out>/tls, <out>/tokens)
// put them: tls/ when it holds psctl.crt, tokens/ when it holds
// admin.token. `found` says which were taken ("" none).
SecuritySettings WithCredentialsBeside(SecuritySettings settings,
                                       const std::string& tf_config_flag,
                                       std::string* found);

// A hint for a call that failed as a plaintext or foreign client of a TLS
// job does ("Socket closed", a failed handshake): which flags to pass, or,
// when psctl already called `with_tls`, that the address may not be the
// task's gRPC port or the credentials another job's. "" for other
// failures.
std::string CredentialHint(const absl::Status& status, bool with_tls = false);

// psctl's credentials under `settings` (insecure when none are given and
// `rpc_layer` does not require TLS).
absl::StatusOr<TransportSecurity> PsctlTransportSecurity(
    const SecuritySettings& settings, const std::string& rpc_layer);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_TLS_FLAGS_H_
