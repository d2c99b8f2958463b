#include "common/rpc/transport_security.h"

#include "absl/strings/str_cat.h"

namespace psflow {

absl::StatusOr<TransportSecurity> ParseTransportSecurity(
    absl::string_view name) {
  if (name == "insecure") return TransportSecurity{};
  return absl::InvalidArgumentError(
      absl::StrCat("--transport_security=", name,
                   " is not a transport security mode; this release "
                   "supports \"insecure\" (plaintext; keep the cluster's "
                   "network private)"));
}

std::string TransportSecurityName(const TransportSecurity& security) {
  switch (security.mode) {
    case TransportSecurity::Mode::kInsecure:
      return "insecure";
  }
  return "unknown";
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(
    const TransportSecurity& security) {
  switch (security.mode) {
    case TransportSecurity::Mode::kInsecure:
      return grpc::InsecureServerCredentials();
  }
  return nullptr;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const TransportSecurity& security) {
  switch (security.mode) {
    case TransportSecurity::Mode::kInsecure:
      return grpc::InsecureChannelCredentials();
  }
  return nullptr;
}

}  // namespace psflow
