// Who is calling, and may they: every psflow server checks each call here
// before acting on it.
//
// The caller's role (rpc_role.h) comes from
//   - its job token (job_tokens.h), when the server has the job's token
//     digests: a call without a token, or with a token that is none of
//     the job's, is UNAUTHENTICATED, and the message names the flag that
//     supplies it;
//   - its certificate's common name, under mutual TLS ("worker-1" is a
//     worker, the chief's task is the chief, "psctl" is admin);
//   - both, when both are on: they must agree (PERMISSION_DENIED if not).
// A server with neither (an open job, warned about at start) lets every
// caller do everything.
//
// Thread-safe; the methods are const.
#ifndef PSFLOW_COMMON_RPC_CALL_AUTHORIZER_H_
#define PSFLOW_COMMON_RPC_CALL_AUTHORIZER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rpc/job_tokens.h"
#include "common/rpc/rpc_role.h"
#include "common/rpc/transport_security.h"
#include "common/task.h"
#include "grpcpp/server_context.h"

namespace psflow {

class CallAuthorizer {
 public:
  explicit CallAuthorizer(const TransportSecurity& security);

  // Whether callers go unchecked (no tokens and no TLS).
  bool open() const { return !tls_ && !tokens_.checks(); }

  // Who called: its role (nullopt when the server is open) and its name,
  // the most specific identity the server has: the certificate's common
  // name under mutual TLS ("worker-1"), else the role's name under job
  // tokens ("worker"), else "" (an open server).
  struct Caller {
    std::optional<RpcRole> role;
    std::string name;
  };
  absl::StatusOr<Caller> IdentifyCaller(
      const grpc::ServerContextBase& context) const;

  // The caller's role; nullopt when the server is open.
  absl::StatusOr<std::optional<RpcRole>> Identify(
      const grpc::ServerContextBase& context) const;

  // Identify(), then PERMISSION_DENIED unless the caller's role is in
  // `allowed`, naming `method` ("Shutdown") and who may call it.
  absl::StatusOr<std::optional<RpcRole>> Authorize(
      const grpc::ServerContextBase& context, const RoleSet& allowed,
      absl::string_view method) const;
  // The same, with the caller's name (IdentifyCaller).
  absl::StatusOr<Caller> AuthorizeCaller(const grpc::ServerContextBase& context,
                                         const RoleSet& allowed,
                                         absl::string_view method) const;

 private:
  JobTokens tokens_;  // digests only: the server's own token is not kept
  bool tls_ = false;
  TaskId chief_task_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_CALL_AUTHORIZER_H_
