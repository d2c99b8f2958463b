// How psflow's processes secure their gRPC connections: the one place that
// turns a security setting into server and channel credentials. Every
// server is started through ServerRunner (server_runner.h) and every
// channel is opened by OpenChannel (channel.h), both from a
// TransportSecurity.
//
// Modes:
//   insecure    plaintext, no peer authentication (keep the network
//               private; every role warns at start);
//   mutual TLS  every process presents its certificate and checks its
//               peer's against the job's CA (gRPC's SSL credentials, from
//               Debian's gRPC); servers refuse clients without a
//               certificate from that CA, clients check the server's name
//               against the address they dial, and, where they know which
//               task should answer, that its certificate names that task
//               (gRPC's TLS credentials with a verifier of ours). `psctl
//               certs gen` makes the CA and one certificate per task.
//
// Job tokens (job_tokens.h) travel with it: OpenChannel presents this
// process's token on every call and CallAuthorizer checks callers'.
//
// Key material is held in memory only and never logged; `source` says
// where it came from. Plain value; thread-compatible. The credential
// factories are thread-safe.
#ifndef PSFLOW_COMMON_RPC_TRANSPORT_SECURITY_H_
#define PSFLOW_COMMON_RPC_TRANSPORT_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rpc/job_tokens.h"
#include "common/task.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace psflow {

struct TransportSecurity {
  enum class Mode { kInsecure, kMutualTls };
  Mode mode = Mode::kInsecure;
  // kMutualTls: the job's CA certificate, and this process's certificate
  // and private key, all PEM.
  std::string ca_pem;
  std::string certificate_pem;
  std::string key_pem;
  // Where the files came from, for messages ("/etc/psflow/tls").
  std::string source;
  // The job's tokens (job_tokens.h): this process presents `tokens.own` on
  // every call and checks callers against `tokens.digests`.
  JobTokens tokens;
  // The task whose certificate carries the chief's rights (worker 0 when
  // TF_CONFIG has no chief job).
  TaskId chief_task{TaskType::kChief, 0};
  // Set by a chief process only (NewChiefIncarnation): every call it makes
  // carries it, so that parameter servers follow one chief of the job at a
  // time (ps/chief_fence.h).
  std::string chief_incarnation;
};

// The metadata key that carries TransportSecurity::chief_incarnation.
inline constexpr char kChiefIncarnationMetadataKey[] =
    "psflow-chief-incarnation";

// A fresh chief incarnation: 16 random hex digits.
std::string NewChiefIncarnation();

// Mutual TLS from PEM text: OK once the key belongs to the certificate and
// the certificate verifies against the CA (so a mistake is named at start,
// not as a failed handshake later).
absl::StatusOr<TransportSecurity> MutualTls(std::string ca_pem,
                                            std::string certificate_pem,
                                            std::string key_pem,
                                            std::string source);

// Mutual TLS from files (each at most 1 MiB); errors name the file.
absl::StatusOr<TransportSecurity> LoadMutualTls(const std::string& ca_path,
                                                const std::string& cert_path,
                                                const std::string& key_path);

// "insecure" or "mtls" (TransportSecurityName's names).
std::string TransportSecurityName(const TransportSecurity& security);

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(
    const TransportSecurity& security);
// With mutual TLS and a non-empty `expected_peer` (a task's name:
// "ps-1", "chief-0"), the server must present that task's certificate
// (its CN), besides one the job's CA signed for the host dialed: where
// tasks share a host (psctl local; several tasks to a node), another
// task's certificate would pass the host check alone, and a compromised
// task could answer for a parameter server.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const TransportSecurity& security, const std::string& expected_peer = "");

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_TRANSPORT_SECURITY_H_
