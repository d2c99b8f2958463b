#include "common/rpc/security_flags.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/tls/certificates.h"

ABSL_FLAG(std::string, transport_security, "",
          "insecure or mtls; default: mtls when TLS files are given "
          "(--tls_dir or --tls_ca/--tls_cert/--tls_key), else insecure");
ABSL_FLAG(std::string, tls_dir, "",
          "Directory with ca.crt, <task>.crt and <task>.key (psctl certs "
          "gen's layout; a mounted Secret); default $PSFLOW_TLS_DIR");
ABSL_FLAG(std::string, tls_ca, "",
          "The job's CA certificate (PEM); default $PSFLOW_TLS_CA, else "
          "<tls_dir>/ca.crt");
ABSL_FLAG(std::string, tls_cert, "",
          "This task's certificate (PEM); default $PSFLOW_TLS_CERT, else "
          "<tls_dir>/<task>.crt");
ABSL_FLAG(std::string, tls_key, "",
          "This task's private key (PEM); default $PSFLOW_TLS_KEY, else "
          "<tls_dir>/<task>.key");

ABSL_FLAG(std::string, token_dir, "",
          "Directory with the job's tokens (psctl tokens gen; a mounted "
          "Secret): <role>.token, and tokens.sha256 for parameter servers "
          "and the chief; default $PSFLOW_TOKEN_DIR (none: no tokens)");

ABSL_FLAG(bool, allow_unauthenticated_callers, false,
          "Serve callers that present neither a certificate nor a job "
          "token: anyone who reaches this task's ports can then read and "
          "change the model, write checkpoints and stop the job. Without "
          "TLS or tokens a task refuses to start unless this is set; with "
          "it the task listens on 127.0.0.1 unless --bind_host says "
          "otherwise. For single-host tests only");
ABSL_FLAG(std::string, bind_host, "",
          "Interface to listen on; the port comes from TF_CONFIG. Default: "
          "every interface (0.0.0.0) with TLS, else 127.0.0.1 (job tokens "
          "without TLS would travel in plaintext; a task TF_CONFIG puts on "
          "another host then refuses to start unless this is set)");

namespace psflow {
namespace {

std::string FlagOrEnv(const std::string& flag, const char* env) {
  if (!flag.empty()) return flag;
  const char* value = std::getenv(env);
  return value == nullptr ? "" : value;
}

}  // namespace

SecuritySettings WithEnvironmentDefaults(SecuritySettings s) {
  s.tls_dir = FlagOrEnv(s.tls_dir, "PSFLOW_TLS_DIR");
  s.ca = FlagOrEnv(s.ca, "PSFLOW_TLS_CA");
  s.cert = FlagOrEnv(s.cert, "PSFLOW_TLS_CERT");
  s.key = FlagOrEnv(s.key, "PSFLOW_TLS_KEY");
  s.token_dir = FlagOrEnv(s.token_dir, "PSFLOW_TOKEN_DIR");
  return s;
}

SecuritySettings SecuritySettingsFromFlags() {
  SecuritySettings s;
  s.mode = absl::GetFlag(FLAGS_transport_security);
  s.tls_dir = absl::GetFlag(FLAGS_tls_dir);
  s.ca = absl::GetFlag(FLAGS_tls_ca);
  s.cert = absl::GetFlag(FLAGS_tls_cert);
  s.key = absl::GetFlag(FLAGS_tls_key);
  s.token_dir = absl::GetFlag(FLAGS_token_dir);
  s.allow_unauthenticated = absl::GetFlag(FLAGS_allow_unauthenticated_callers);
  return WithEnvironmentDefaults(s);
}

namespace {

absl::StatusOr<TransportSecurity> ResolveTransport(
    const SecuritySettings& settings, const SecurityIdentity& identity,
    const std::string& rpc_layer) {
  const std::string& name = identity.name;
  const bool files = !settings.tls_dir.empty() || !settings.ca.empty() ||
                     !settings.cert.empty() || !settings.key.empty();
  std::string mode = settings.mode;
  if (mode.empty()) mode = files ? "mtls" : "insecure";
  if (mode != "insecure" && mode != "mtls") {
    return absl::InvalidArgumentError(
        absl::StrCat("--transport_security=", mode,
                     " is not a transport security mode; use mtls (mutual "
                     "TLS) or insecure (plaintext)"));
  }
  if (mode == "insecure") {
    if (rpc_layer == "grpc+tls") {
      return absl::InvalidArgumentError(
          "TF_CONFIG's rpc_layer \"grpc+tls\" requires TLS, but no "
          "credentials were given: pass --tls_dir (or --tls_ca, --tls_cert "
          "and --tls_key, or the PSFLOW_TLS_* variables); psctl certs gen "
          "makes them");
    }
    if (files) {
      return absl::InvalidArgumentError(
          "TLS files were given with --transport_security=insecure; drop "
          "one or the other");
    }
    return TransportSecurity();
  }
  auto pick = [&](const std::string& explicit_path, const std::string& file) {
    if (!explicit_path.empty()) return explicit_path;
    if (settings.tls_dir.empty()) return std::string();
    return absl::StrCat(settings.tls_dir, "/", file);
  };
  const std::string ca = pick(settings.ca, "ca.crt");
  const std::string cert = pick(settings.cert, name + ".crt");
  const std::string key = pick(settings.key, name + ".key");
  if (ca.empty() || cert.empty() || key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mutual TLS needs the job's CA certificate, ", name,
        "'s certificate and its key: pass --tls_dir=<dir with ca.crt, ", name,
        ".crt, ", name, ".key> or all of --tls_ca, --tls_cert and --tls_key"));
  }
  absl::StatusOr<TransportSecurity> security = LoadMutualTls(ca, cert, key);
  if (!security.ok()) return security;
  if (absl::Status own = CheckCertificateIdentity(security->certificate_pem,
                                                  name, identity.host);
      !own.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS credentials from ", security->source, ": ", own.message()));
  }
  return security;
}

}  // namespace

absl::StatusOr<TransportSecurity> ResolveTransportSecurity(
    const SecuritySettings& settings, const SecurityIdentity& identity,
    const std::string& rpc_layer) {
  absl::StatusOr<TransportSecurity> security =
      ResolveTransport(settings, identity, rpc_layer);
  if (!security.ok()) return security;
  security->chief_task = identity.chief_task;
  if (!settings.token_dir.empty()) {
    absl::StatusOr<JobTokens> tokens = LoadJobTokens(
        settings.token_dir, identity.role, ChecksCallers(identity.role));
    if (!tokens.ok()) return tokens.status();
    security->tokens = *std::move(tokens);
  }
  return security;
}

bool AuthenticatesCallers(const TransportSecurity& security) {
  return security.mode != TransportSecurity::Mode::kInsecure ||
         security.tokens.checks() || security.tokens.presents();
}

absl::Status RefuseUnauthenticated(const SecuritySettings& settings,
                                   const TransportSecurity& security,
                                   const std::string& task) {
  if (AuthenticatesCallers(security) || settings.allow_unauthenticated) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      task,
      " was given no TLS credentials and no job tokens, so it would obey "
      "anyone who reaches its port. Make them once per job: psctl certs gen "
      "--tf_config=<TF_CONFIG file> --out=tls/ and psctl tokens gen "
      "--out=tokens/, then start "
      "every task with --tls_dir=tls/ --token_dir=tokens/ (or "
      "$PSFLOW_TLS_DIR and $PSFLOW_TOKEN_DIR); see docs/operations.md, "
      "\"Security\". On a single-host test machine, "
      "--allow_unauthenticated_callers serves without them, on 127.0.0.1"));
}

namespace {

// Whether `address` (host:port) has an IPv6 literal for its host.
bool IsIpv6Literal(const std::optional<std::string>& address) {
  if (!address.has_value()) return false;
  absl::StatusOr<HostPort> parsed = ParseHostPort(*address);
  in6_addr v6;
  return parsed.ok() && inet_pton(AF_INET6, parsed->host.c_str(), &v6) == 1;
}

}  // namespace

std::string DefaultBindHost(const TransportSecurity& security,
                            const std::optional<std::string>& own_address) {
  const bool v6 = IsIpv6Literal(own_address);
  if (security.mode != TransportSecurity::Mode::kInsecure) {
    return v6 ? "::" : "0.0.0.0";
  }
  return v6 ? "::1" : "127.0.0.1";
}

namespace {

// Whether `address` (TF_CONFIG's host:port) names this host's loopback:
// "localhost", or a literal loopback address (a DNS name that merely
// starts with "127." is another host).
bool OnLoopback(const std::string& address) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(address);
  if (!parsed.ok()) return false;
  if (absl::AsciiStrToLower(parsed->host) == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, parsed->host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  return inet_pton(AF_INET6, parsed->host.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace

absl::StatusOr<TransportSecurity> TransportSecurityFromFlags(
    const TfConfig& tf_config) {
  SecurityIdentity identity;
  identity.name = tf_config.task.ToString();
  if (const std::optional<std::string> own = tf_config.TaskAddress()) {
    if (absl::StatusOr<HostPort> parsed = ParseHostPort(*own); parsed.ok()) {
      identity.host = parsed->host;
    }
  }
  identity.chief_task = tf_config.ChiefTask();
  identity.role = RoleOfTask(tf_config.task, identity.chief_task);
  const SecuritySettings settings = SecuritySettingsFromFlags();
  absl::StatusOr<TransportSecurity> security =
      ResolveTransportSecurity(settings, identity, tf_config.rpc_layer);
  if (!security.ok()) return security;
  RETURN_IF_ERROR(RefuseUnauthenticated(settings, *security, identity.name));
  const bool tls = security->mode != TransportSecurity::Mode::kInsecure;
  const bool tokens = security->tokens.presents() || security->tokens.checks();
  if (!tls && !tokens) {
    // On loopback by default: peers could not reach a task that TF_CONFIG
    // puts at another address, and the job would stall until timeouts.
    const std::optional<std::string> own = tf_config.TaskAddress();
    if (absl::GetFlag(FLAGS_bind_host).empty() && own.has_value() &&
        !OnLoopback(*own)) {
      return absl::FailedPreconditionError(absl::StrCat(
          identity.name,
          " runs with --allow_unauthenticated_callers, which listens on "
          "loopback only, but TF_CONFIG puts it at ",
          *own,
          ", where its peers could not reach it. On one host, give every "
          "task a loopback address (127.0.0.1:<port> or localhost:<port>); "
          "across hosts, add TLS and tokens (docs/operations.md, "
          "\"Security\"), or pass --bind_host=0.0.0.0 to serve anyone who "
          "can reach the port"));
    }
    LOG(WARNING) << "--allow_unauthenticated_callers: no transport security "
                    "and no job token, so anyone who can reach this task's "
                    "ports can read and change the model and stop the job"
                 << (absl::GetFlag(FLAGS_bind_host).empty()
                         ? "; listening on loopback only"
                         : absl::StrCat("; listening on --bind_host=",
                                        absl::GetFlag(FLAGS_bind_host)));
  } else if (!tls) {
    // Loopback by default (DefaultBindHost): a task other hosts must reach
    // would be unreachable there, and plaintext tokens are a choice to
    // make out loud.
    const std::optional<std::string> own = tf_config.TaskAddress();
    if (absl::GetFlag(FLAGS_bind_host).empty() && own.has_value() &&
        !OnLoopback(*own)) {
      return absl::FailedPreconditionError(absl::StrCat(
          identity.name,
          " has job tokens but no TLS, and TF_CONFIG puts it at ", *own,
          ": other hosts would send it their tokens in plaintext, for anyone "
          "who can watch the network to take. Add certificates (psctl certs "
          "gen --tf_config=<TF_CONFIG file> --out=tls/; --tls_dir=tls/), or "
          "pass --bind_host=0.0.0.0 to serve plaintext tokens anyway; see "
          "docs/operations.md, \"Security\""));
    }
    LOG(WARNING) << "job tokens from " << security->tokens.source
                 << " without TLS: they travel in plaintext, so anyone who "
                    "can watch the network can take them. Across hosts, "
                    "add certificates (psctl certs gen; --tls_dir)";
  } else {
    LOG(INFO) << "mutual TLS with " << security->source
              << (tokens ? absl::StrCat(", job tokens from ",
                                        security->tokens.source)
                         : std::string());
  }
  return security;
}

std::string BindHostFromFlags(const TransportSecurity& security,
                              const TfConfig& tf_config) {
  const std::string flag = absl::GetFlag(FLAGS_bind_host);
  return flag.empty() ? DefaultBindHost(security, tf_config.TaskAddress())
                      : flag;
}

}  // namespace psflow
