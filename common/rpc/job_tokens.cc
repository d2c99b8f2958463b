#include "common/rpc/job_tokens.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/rpc/credential_files.h"

namespace psflow {
namespace {

constexpr size_t kTokenBytes = 32;
constexpr size_t kTokenHexDigits = 2 * kTokenBytes;
// Larger files are refused before reading: a token file is one line, the
// digests file one line per role.
constexpr int64_t kMaxTokenFileBytes = 4096;

constexpr char kFix[] =
    "psctl tokens gen --out=DIR makes a job's tokens; pass that directory "
    "as --token_dir (or $PSFLOW_TOKEN_DIR)";

TokenDigest Sha256(absl::string_view text) {
  TokenDigest digest;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest.data());
  return digest;
}

bool IsLowerHex(absl::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A small regular file, read whole (common/file_util: a FIFO or device is
// refused without blocking, the size is checked before reading); errors
// name it and the fix.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          absl::string_view what,
                                          CredentialKind kind) {
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxTokenFileBytes);
  if (text.ok()) {
    absl::Status guarded = CheckCredentialFile(path, kind, what);
    if (!guarded.ok()) return guarded;
    return text;
  }
  // Not a regular file, or too large: the file is wrong, not missing.
  const absl::StatusCode code = absl::IsFailedPrecondition(text.status()) ||
                                        absl::IsInvalidArgument(text.status())
                                    ? absl::StatusCode::kInvalidArgument
                                    : text.status().code();
  return absl::Status(code, absl::StrCat("cannot read ", what, ": ",
                                         text.status().message(), "; ", kFix));
}

}  // namespace

std::string TokenFileName(RpcRole role) {
  return absl::StrCat(RpcRoleName(role), ".token");
}

absl::StatusOr<std::map<RpcRole, std::string>> GenerateJobTokens() {
  std::map<RpcRole, std::string> tokens;
  for (RpcRole role : kCallingRoles) {
    unsigned char bytes[kTokenBytes];
    if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
      return absl::InternalError(
          "OpenSSL's random generator failed; cannot make job tokens");
    }
    tokens[role] = absl::BytesToHexString(
        absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
    OPENSSL_cleanse(bytes, sizeof(bytes));
  }
  return tokens;
}

std::string TokenDigestsText(const std::map<RpcRole, std::string>& tokens) {
  std::string text =
      "# psflow job token digests (psctl tokens gen): <role> <sha256>\n";
  for (const auto& [role, token] : tokens) {
    const TokenDigest digest = Sha256(token);
    absl::StrAppend(
        &text, RpcRoleName(role), " ",
        absl::BytesToHexString(absl::string_view(
            reinterpret_cast<const char*>(digest.data()), digest.size())),
        "\n");
  }
  return text;
}

namespace {

absl::Status WriteToken(const std::string& dir, RpcRole role,
                        const std::string& token) {
  return WriteFileWithMode(absl::StrCat(dir, "/", TokenFileName(role)),
                           token + "\n", 0600);
}

absl::Status WriteDigests(const std::string& dir,
                          const std::map<RpcRole, std::string>& tokens) {
  return WriteFileWithMode(absl::StrCat(dir, "/", kTokenDigestsFile),
                           TokenDigestsText(tokens), 0644);
}

}  // namespace

absl::Status WriteJobTokens(const std::map<RpcRole, std::string>& tokens,
                            const std::string& dir) {
  if (absl::Status made = MakePrivateDirectory(dir); !made.ok()) return made;
  absl::Status status;
  for (const auto& [role, token] : tokens) {
    status.Update(WriteToken(dir, role, token));
  }
  status.Update(WriteDigests(dir, tokens));
  return status;
}

bool ChecksCallers(RpcRole role) {
  return role == RpcRole::kPs || role == RpcRole::kChief;
}

absl::Status WriteRoleTokens(const std::map<RpcRole, std::string>& tokens,
                             RpcRole role, const std::string& dir) {
  if (absl::Status made = MakePrivateDirectory(dir); !made.ok()) return made;
  absl::Status status;
  if (auto own = tokens.find(role); own != tokens.end()) {
    status.Update(WriteToken(dir, role, own->second));
  }
  if (ChecksCallers(role)) status.Update(WriteDigests(dir, tokens));
  return status;
}

absl::StatusOr<JobTokens> LoadJobTokens(const std::string& dir, RpcRole role,
                                        bool checks_callers) {
  JobTokens tokens;
  tokens.source = absl::StrCat("--token_dir=", dir);
  const bool calls =
      std::find(std::begin(kCallingRoles), std::end(kCallingRoles), role) !=
      std::end(kCallingRoles);
  if (calls) {
    const std::string path = absl::StrCat(dir, "/", TokenFileName(role));
    absl::StatusOr<std::string> text =
        ReadSmallFile(path, absl::StrCat("the ", RpcRoleName(role), " token"),
                      CredentialKind::kSecret);
    if (!text.ok()) return text.status();
    const absl::string_view token = absl::StripAsciiWhitespace(*text);
    if (token.size() != kTokenHexDigits || !IsLowerHex(token)) {
      // Never echo the content: it may be a secret put in the wrong place.
      return absl::InvalidArgumentError(
          absl::StrCat("the token file ", path, " does not hold a token (",
                       kTokenHexDigits, " lowercase hex digits); ", kFix));
    }
    tokens.own = std::string(token);
  }
  if (checks_callers) {
    const std::string path = absl::StrCat(dir, "/", kTokenDigestsFile);
    absl::StatusOr<std::string> text =
        ReadSmallFile(path, "the token digests", CredentialKind::kPublic);
    if (!text.ok()) return text.status();
    int line_number = 0;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      ++line_number;
      line = absl::StripAsciiWhitespace(line);
      if (line.empty() || line[0] == '#') continue;
      std::vector<absl::string_view> fields =
          absl::StrSplit(line, ' ', absl::SkipEmpty());
      std::optional<RpcRole> named =
          fields.size() == 2 ? ParseRpcRole(fields[0]) : std::nullopt;
      if (!named.has_value() || fields[1].size() != 2 * sizeof(TokenDigest) ||
          !IsLowerHex(fields[1]) || tokens.digests.count(*named) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, " line ", line_number,
            " is not \"<role> <sha256 in hex>\" for a new role (chief, "
            "worker, evaluator, admin); ",
            kFix));
      }
      const std::string bytes = absl::HexStringToBytes(fields[1]);
      TokenDigest digest;
      std::memcpy(digest.data(), bytes.data(), digest.size());
      // One token for two roles: a caller presenting it could not be told
      // apart, and would be taken for whichever came last.
      for (const auto& [role, other] : tokens.digests) {
        if (other == digest) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, " line ", line_number, " gives ", RpcRoleName(*named),
              " the same token as ", RpcRoleName(role),
              "; each role needs its own, or the callers of one would act "
              "as the other; ",
              kFix));
        }
      }
      tokens.digests[*named] = digest;
    }
    if (tokens.digests.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " names no role's token; ", kFix));
    }
  }
  return tokens;
}

std::optional<absl::string_view> BearerToken(absl::string_view value) {
  constexpr absl::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme) ||
      value[kScheme.size()] != ' ') {
    return std::nullopt;
  }
  value.remove_prefix(kScheme.size());
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (value.empty()) return std::nullopt;
  return value;
}

std::optional<RpcRole> RoleOfToken(const JobTokens& tokens,
                                   absl::string_view presented) {
  const TokenDigest digest = Sha256(presented);
  std::optional<RpcRole> found;
  // Every digest is compared, whatever matched, in constant time each.
  for (const auto& [role, expected] : tokens.digests) {
    if (CRYPTO_memcmp(digest.data(), expected.data(), digest.size()) == 0) {
      found = role;
    }
  }
  return found;
}

}  // namespace psflow
