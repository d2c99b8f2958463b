#include "client/psctl/tls_flags.h"

#include <sys/stat.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

SecuritySettings WithCredentialsBeside(SecuritySettings settings,
                                       const std::string& tf_config_flag,
                                       std::string* found) {
  found->clear();
  const SecuritySettings given = WithEnvironmentDefaults(settings);
  if (!given.mode.empty() || !given.tls_dir.empty() || !given.ca.empty() ||
      !given.cert.empty() || !given.key.empty() || !given.token_dir.empty()) {
    return settings;
  }
  const absl::string_view flag = absl::StripAsciiWhitespace(tf_config_flag);
  if (flag.empty() || flag[0] == '{' || !IsFile(std::string(flag))) {
    return settings;
  }
  const size_t slash = flag.rfind('/');
  const std::string folder = slash == absl::string_view::npos
                                 ? "."
                                 : std::string(flag.substr(0, slash));
  for (const std::string& dir : {folder, folder + "/.."}) {
    const bool tls = IsFile(dir + "/tls/psctl.crt");
    const bool tokens = IsFile(dir + "/tokens/admin.token");
    if (!tls && !tokens) continue;
    if (tls) {
      settings.tls_dir = dir + "/tls";
      absl::StrAppend(found, "--tls_dir=", settings.tls_dir);
    }
    if (tokens) {
      settings.token_dir = dir + "/tokens";
      absl::StrAppend(found, found->empty() ? "" : " ",
                      "--token_dir=", settings.token_dir);
    }
    break;
  }
  return settings;
}

std::string CredentialHint(const absl::Status& status, bool with_tls) {
  const std::string message = absl::AsciiStrToLower(status.message());
  if (status.code() != absl::StatusCode::kUnavailable ||
      !(absl::StrContains(message, "socket closed") ||
        absl::StrContains(message, "handshake") ||
        absl::StrContains(message, "ssl") ||
        absl::StrContains(message, "tls"))) {
    return "";
  }
  if (with_tls) {
    return "; the TLS connection failed though psctl passed credentials: "
           "check that the address is the task's gRPC port (not its "
           "--metrics_port, nor another service) and that the credentials "
           "are this job's (psctl certs gen made them for it)";
  }
  return "; the job's TLS refused this connection: pass its credentials, "
         "--tls_dir=<the job's tls folder> --token_dir=<its tokens folder> "
         "(a psctl local job keeps them in <dir>/tls and <dir>/tokens, "
         "which --tf_config=<dir>/tf_config/<task>.json finds by itself)";
}

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
