#include "client/psctl/tls_flags.h"

namespace psflow {

void AddTlsFlags(FlagSet& flags, SecuritySettings* settings) {
  flags.AddString("tls_dir", &settings->tls_dir,
                  "the job's TLS files (psctl certs gen): ca.crt, psctl.crt, "
                  "psctl.key; default $PSFLOW_TLS_DIR (none: plaintext)");
  flags.AddString("tls_ca", &settings->ca,
                  "the job's CA certificate (instead of --tls_dir)");
  flags.AddString("tls_cert", &settings->cert,
                  "psctl's certificate (instead of --tls_dir)");
  flags.AddString("tls_key", &settings->key,
                  "psctl's private key (instead of --tls_dir)");
  flags.AddString("token_dir", &settings->token_dir,
                  "the job's tokens (psctl tokens gen): psctl presents "
                  "admin.token; default $PSFLOW_TOKEN_DIR (none: no token)");
}

absl::StatusOr<TransportSecurity> PsctlTransportSecurity(
    const SecuritySettings& settings, const std::string& rpc_layer) {
  SecurityIdentity identity;
  identity.name = "psctl";
  identity.role = RpcRole::kAdmin;
  return ResolveTransportSecurity(WithEnvironmentDefaults(settings), identity,
                                  rpc_layer);
}

}  // namespace psflow
