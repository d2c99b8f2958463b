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

// psctl's credentials under `settings` (insecure when none are given and
// `rpc_layer` does not require TLS).
absl::StatusOr<TransportSecurity> PsctlTransportSecurity(
    const SecuritySettings& settings, const std::string& rpc_layer);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_TLS_FLAGS_H_
