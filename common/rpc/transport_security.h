// How psflow's processes secure their gRPC connections: the one place that
// turns a security setting into server and channel credentials. Every
// server is started through ServerRunner (server_runner.h) and every
// channel is opened by OpenChannel (channel.h), both from a
// TransportSecurity, so a new mode (mutual TLS) is added here and nowhere
// else.
//
// Today the only mode is "insecure" (plaintext, no peer authentication);
// roles select it with --transport_security.
//
// Plain value; thread-compatible. The credential factories are
// thread-safe.
#ifndef PSFLOW_COMMON_RPC_TRANSPORT_SECURITY_H_
#define PSFLOW_COMMON_RPC_TRANSPORT_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace psflow {

struct TransportSecurity {
  enum class Mode { kInsecure };
  Mode mode = Mode::kInsecure;
};

// "insecure". InvalidArgument naming the value and the accepted ones.
absl::StatusOr<TransportSecurity> ParseTransportSecurity(
    absl::string_view name);

// The name ParseTransportSecurity accepts for `security`.
std::string TransportSecurityName(const TransportSecurity& security);

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(
    const TransportSecurity& security);
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const TransportSecurity& security);

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_TRANSPORT_SECURITY_H_
