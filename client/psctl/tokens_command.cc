#include "client/psctl/tokens_command.h"

#include <ostream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/psctl/existing_credentials.h"
#include "common/file_util.h"
#include "common/rpc/job_tokens.h"

namespace psflow {
namespace {

class TokensGenCommand : public Subcommand {
 public:
  TokensGenCommand()
      : Subcommand(
            "tokens gen", {},
            "psctl tokens gen --out=DIR [--secret_name=psflow-tokens] "
            "[--namespace=default] [--overwrite]",
            "A job's access tokens: a random token per role that calls\n"
            "(chief.token, worker.token, evaluator.token, admin.token for\n"
            "psctl), tokens.sha256 that servers check them against, and\n"
            "secret.yaml (a Kubernetes Secret without admin.token). Give\n"
            "every task --token_dir=DIR (or mount the Secret there).") {
    FlagSet& flags = mutable_flags();
    flags.AddString("out", &out_, "directory for the files (required)");
    flags.AddString("secret_name", &secret_.name,
                    "the Kubernetes Secret's name");
    flags.AddString("namespace", &secret_.namespace_name,
                    "the Kubernetes Secret's namespace");
    flags.AddBool("overwrite", &overwrite_,
                  "replace the tokens a folder already holds");
  }

  int Run(const std::vector<std::string>&, std::ostream& out,
          std::ostream& err) override {
    if (out_.empty()) {
      err << "psctl tokens gen: --out=DIR is required\n";
      return kExitUsage;
    }
    if (!overwrite_) {
      std::vector<std::string> names = JobTokenFiles();
      names.push_back("secret.yaml");
      if (absl::Status fresh =
              RefuseToReplaceCredentials(out_, names, "a job's tokens");
          !fresh.ok()) {
        err << "psctl tokens gen: " << fresh.message() << "\n";
        return kExitFailed;
      }
    }
    absl::StatusOr<std::map<RpcRole, std::string>> tokens = GenerateJobTokens();
    absl::Status status = tokens.status();
    if (status.ok()) status = WriteJobTokens(*tokens, out_);
    if (status.ok()) {
      status = WriteFileWithMode(absl::StrCat(out_, "/secret.yaml"),
                                 JobTokensSecret(*tokens, secret_), 0600);
    }
    if (!status.ok()) {
      err << "psctl tokens gen: " << status.message() << "\n";
      return kExitFailed;
    }
    out << "wrote " << tokens->size() << " tokens, " << kTokenDigestsFile
        << " and secret.yaml to " << out_
        << "; start every task with --token_dir=" << out_
        << " (psctl uses admin.token)\n";
    return kExitOk;
  }

 private:
  std::string out_;
  bool overwrite_ = false;
  SecretOptions secret_{"psflow-tokens", "default"};
};

}  // namespace

std::string JobTokensSecret(const std::map<RpcRole, std::string>& tokens,
                            const SecretOptions& secret) {
  std::string yaml = absl::StrCat(
      "# The job's access tokens (psctl tokens gen), mounted read-only as\n"
      "# every task's --token_dir. The admin token is not in it.\n"
      "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ",
      secret.name, "\n  namespace: ", secret.namespace_name,
      "\ntype: Opaque\ndata:\n  ", kTokenDigestsFile, ": ",
      absl::Base64Escape(TokenDigestsText(tokens)), "\n");
  for (const auto& [role, token] : tokens) {
    if (role == RpcRole::kAdmin) continue;  // operators keep theirs
    absl::StrAppend(&yaml, "  ", TokenFileName(role), ": ",
                    absl::Base64Escape(token + "\n"), "\n");
  }
  return yaml;
}

std::unique_ptr<Subcommand> NewTokensGenCommand() {
  return std::make_unique<TokensGenCommand>();
}

}  // namespace psflow
