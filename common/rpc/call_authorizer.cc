#include "common/rpc/call_authorizer.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

// Longer metadata values are refused before hashing.
constexpr size_t kMaxTokenMetadataBytes = 256;

std::optional<std::string> CertificateName(
    const grpc::ServerContextBase& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::nullopt;
  const std::vector<grpc::string_ref> names =
      auth->FindPropertyValues("x509_common_name");
  if (names.size() != 1) return std::nullopt;
  return std::string(names[0].data(), names[0].size());
}

}  // namespace

CallAuthorizer::CallAuthorizer(const TransportSecurity& security)
    : tls_(security.mode == TransportSecurity::Mode::kMutualTls),
      chief_task_(security.chief_task) {
  tokens_.digests = security.tokens.digests;
  tokens_.source = security.tokens.source;
}

absl::StatusOr<std::optional<RpcRole>> CallAuthorizer::Identify(
    const grpc::ServerContextBase& context) const {
  absl::StatusOr<Caller> caller = IdentifyCaller(context);
  if (!caller.ok()) return caller.status();
  return caller->role;
}

absl::StatusOr<CallAuthorizer::Caller> CallAuthorizer::IdentifyCaller(
    const grpc::ServerContextBase& context) const {
  std::optional<RpcRole> by_certificate;
  std::optional<std::string> name;
  if (tls_) {
    name = CertificateName(context);
    if (name.has_value()) {
      by_certificate = RoleOfCertificateName(*name, chief_task_);
    }
    if (!by_certificate.has_value()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the caller's certificate names ",
          name.has_value() ? absl::StrCat("\"", *name, "\"") : "nobody",
          ", which is no task of this job and not psctl; use a certificate "
          "from psctl certs gen for this job"));
    }
  }
  if (!tokens_.checks()) {
    return Caller{by_certificate, name.value_or("")};
  }

  const auto& metadata = context.client_metadata();
  const auto found = metadata.find(kTokenMetadataKey);
  if (found == metadata.end()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the call carries no job token, and this server admits only callers "
        "of its job: start the caller with --token_dir=<the job's token "
        "directory> (or $PSFLOW_TOKEN_DIR; psctl tokens gen makes one; this "
        "server checks tokens from ",
        tokens_.source, ")"));
  }
  const absl::string_view value(found->second.data(), found->second.size());
  std::optional<RpcRole> by_token;
  if (value.size() <= kMaxTokenMetadataBytes) {
    if (std::optional<absl::string_view> token = BearerToken(value)) {
      by_token = RoleOfToken(tokens_, *token);
    }
  }
  if (!by_token.has_value()) {
    // Never echo the presented value.
    return absl::UnauthenticatedError(absl::StrCat(
        "the call's job token is not one of this job's: start the caller "
        "with the --token_dir (or $PSFLOW_TOKEN_DIR) of this job (this "
        "server checks tokens from ",
        tokens_.source, ")"));
  }
  if (by_certificate.has_value() && *by_certificate != *by_token) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the caller's certificate says role ", RpcRoleName(*by_certificate),
        " but its token is role ", RpcRoleName(*by_token),
        "'s; give every task its own role's token"));
  }
  return Caller{by_token,
                name.has_value() ? *name : std::string(RpcRoleName(*by_token))};
}

absl::StatusOr<std::optional<RpcRole>> CallAuthorizer::Authorize(
    const grpc::ServerContextBase& context, const RoleSet& allowed,
    absl::string_view method) const {
  absl::StatusOr<Caller> caller = AuthorizeCaller(context, allowed, method);
  if (!caller.ok()) return caller.status();
  return caller->role;
}

absl::StatusOr<CallAuthorizer::Caller> CallAuthorizer::AuthorizeCaller(
    const grpc::ServerContextBase& context, const RoleSet& allowed,
    absl::string_view method) const {
  absl::StatusOr<Caller> caller = IdentifyCaller(context);
  if (!caller.ok() || !caller->role.has_value()) return caller;
  if (!allowed.Contains(*caller->role)) {
    return absl::PermissionDeniedError(absl::StrCat(
        method, " is for ", allowed.Describe(), " only; the caller's role is ",
        RpcRoleName(*caller->role)));
  }
  return caller;
}

}  // namespace psflow
