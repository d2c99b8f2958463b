// A job's access tokens: the secret every call carries, which also says
// the caller's role when TLS does not (rpc_role.h).
//
// `psctl tokens gen` (or `psctl local`, for every job) writes one
// directory:
//
//   chief.token, worker.token, evaluator.token, admin.token
//                 one random 256-bit token per calling role (64 hex
//                 digits), mode 0600. A process presents its role's token
//                 on every call, in the "authorization: Bearer <token>"
//                 metadata. A worker's pod needs only worker.token.
//   tokens.sha256 the SHA-256 of each role's token, "<role> <hex>" per
//                 line: what a server (parameter servers, the chief)
//                 checks callers against. Holding it lets nobody call.
//
// Presented tokens are hashed and compared in constant time with every
// role's digest. Tokens are held in memory only, and never logged or
// written anywhere but `psctl tokens gen`'s files.
#ifndef PSFLOW_COMMON_RPC_JOB_TOKENS_H_
#define PSFLOW_COMMON_RPC_JOB_TOKENS_H_

#include <array>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rpc/rpc_role.h"

namespace psflow {

// The metadata key that carries a token, and the scheme before it.
inline constexpr char kTokenMetadataKey[] = "authorization";
inline constexpr char kTokenScheme[] = "Bearer ";
// The roles that call others, and so have a token. (Parameter servers
// only answer.)
inline constexpr RpcRole kCallingRoles[] = {
    RpcRole::kChief, RpcRole::kWorker, RpcRole::kEvaluator, RpcRole::kAdmin};
inline constexpr char kTokenDigestsFile[] = "tokens.sha256";

using TokenDigest = std::array<unsigned char, 32>;

struct JobTokens {
  // This process's token, presented on every call ("" none).
  std::string own;
  // Each role's token digest, to check callers (empty: checks nobody).
  std::map<RpcRole, TokenDigest> digests;
  // Where they came from, for messages ("--token_dir=/etc/psflow/tokens").
  std::string source;

  bool presents() const { return !own.empty(); }
  bool checks() const { return !digests.empty(); }
};

// "<role>.token".
std::string TokenFileName(RpcRole role);

// A fresh token per calling role, from OpenSSL's CSPRNG.
absl::StatusOr<std::map<RpcRole, std::string>> GenerateJobTokens();

// tokens.sha256's text for `tokens`.
std::string TokenDigestsText(const std::map<RpcRole, std::string>& tokens);

// Writes every token file (0600) and tokens.sha256 (0644) into `dir`
// (created if needed, 0700).
absl::Status WriteJobTokens(const std::map<RpcRole, std::string>& tokens,
                            const std::string& dir);

// Whether a process of `role` checks its callers' tokens, and so reads
// tokens.sha256: parameter servers and the chief.
bool ChecksCallers(RpcRole role);

// Writes into `dir` (created if needed, 0700) exactly what
// LoadJobTokens(dir, role, ChecksCallers(role)) reads: the role's own
// token when it calls others, tokens.sha256 when it checks callers.
absl::Status WriteRoleTokens(const std::map<RpcRole, std::string>& tokens,
                             RpcRole role, const std::string& dir);

// What a process of `role` needs from `dir`: its own token (every calling
// role) and tokens.sha256 (when `checks_callers`: parameter servers and
// the chief). Errors name the missing or malformed file and the fix.
absl::StatusOr<JobTokens> LoadJobTokens(const std::string& dir, RpcRole role,
                                        bool checks_callers);

// The token of an "authorization" value, "Bearer <token>": the scheme is
// matched case-insensitively and may be followed by several spaces (RFC
// 7235, RFC 6750); nullopt for another scheme or no token.
std::optional<absl::string_view> BearerToken(absl::string_view value);

// The role whose token `presented` is, comparing in constant time with
// every digest; nullopt when it is none of them.
std::optional<RpcRole> RoleOfToken(const JobTokens& tokens,
                                   absl::string_view presented);

}  // namespace psflow

#endif  // PSFLOW_COMMON_RPC_JOB_TOKENS_H_
