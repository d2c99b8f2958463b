#include "client/psctl/tfconfig_command.h"

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/psctl/existing_credentials.h"
#include "client/psctl/job_certificates.h"
#include "client/psctl/task_credentials.h"
#include "client/psctl/tfconfig_gen.h"
#include "client/psctl/tfconfig_report.h"
#include "client/psctl/tokens_command.h"
#include "common/file_util.h"
#include "common/rpc/job_tokens.h"
#include "common/status_macros.h"
#include "common/tf_config.h"
#include "common/tf_config_loader.h"

namespace psflow {
namespace {

class TfConfigCheckCommand : public Subcommand {
 public:
  TfConfigCheckCommand()
      : Subcommand(
            "tfconfig check", {},
            "psctl tfconfig check [--tf_config=<file or JSON>]",
            "Validate this process's TF_CONFIG (environment variable or "
            "flag),\n"
            "print its task, whether it acts as chief, and every peer.") {
    mutable_flags().AddString(
        "tf_config", &tf_config_,
        "TF_CONFIG as inline JSON or a path to a JSON file; defaults to the "
        "TF_CONFIG environment variable");
  }

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    absl::StatusOr<LoadedTfConfig> loaded =
        LoadTfConfigFromFlagOrEnvironment(tf_config_);
    if (!loaded.ok()) {
      err << "psctl tfconfig check: " << loaded.status().message() << "\n";
      return kExitFailed;
    }
    out << FormatTfConfigReport(*loaded);
    return kExitOk;
  }

 private:
  std::string tf_config_;
};

class TfConfigGenCommand : public Subcommand {
 public:
  TfConfigGenCommand()
      : Subcommand(
            "tfconfig gen", {},
            "psctl tfconfig gen --chief=HOST[:PORT] --ps=H1,H2 "
            "--workers=H1,H2\n"
            "                   [--evaluator=HOST] [--port=2222] [--out=DIR]\n"
            "                   [--credentials --job=NAME]",
            "The TF_CONFIG of every task, as `export TF_CONFIG=...` lines or\n"
            "one DIR/<task>.json per task; with --credentials also the job's\n"
            "certificates (DIR/tls) and tokens (DIR/tokens) for those hosts,\n"
            "and DIR/tasks/<task> with only what that task needs.") {
    FlagSet& flags = mutable_flags();
    flags.AddString("chief", &options_.chief,
                    "the chief's HOST[:PORT]; without it worker 0 is the "
                    "chief");
    flags.AddStringList("ps", &options_.ps,
                        "the parameter servers' HOST[:PORT]s, comma-separated");
    flags.AddStringList("workers", &options_.workers,
                        "the workers' HOST[:PORT]s, comma-separated");
    flags.AddString("evaluator", &options_.evaluator,
                    "the evaluator's HOST[:PORT] (optional)");
    flags.AddInt("port", &options_.default_port,
                 "the port of a host given without one (1..65535)");
    flags.AddString("out", &out_dir_,
                    "write one <task>.json per task into this directory "
                    "instead of printing export lines");
    flags.AddBool("credentials", &credentials_,
                  "also write what every task needs to start securely: "
                  "<out>/tls (psctl certs gen for these hosts), "
                  "<out>/tokens (psctl tokens gen), and <out>/tasks/<task> "
                  "with only that task's share; needs --out");
    flags.AddString("job", &job_, "the job's name, in the certificates");
    flags.AddInt("days", &days_, "how long the certificates are valid");
    flags.AddBool("overwrite", &overwrite_,
                  "with --credentials: replace the CA and tokens <out> "
                  "already holds");
  }

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    if (options_.default_port <= 0 || options_.default_port >= 65536) {
      err << "psctl tfconfig gen: --port=" << options_.default_port
          << " is not a port; use 1..65535\n";
      return kExitUsage;
    }
    absl::StatusOr<std::vector<std::pair<TaskId, std::string>>> configs =
        GenerateTfConfigs(options_);
    if (!configs.ok()) {
      err << "psctl tfconfig gen: " << configs.status().message() << "\n";
      return kExitUsage;
    }
    if (credentials_ && out_dir_.empty()) {
      err << "psctl tfconfig gen: --credentials writes files and needs "
             "--out=DIR\n";
      return kExitUsage;
    }
    if (credentials_ && !overwrite_) {
      // Before anything is written: new credentials would lock out every
      // task started with the ones there.
      absl::Status fresh = RefuseToReplaceCredentials(
          out_dir_ + "/tls", JobCaFiles(), "a job's CA");
      if (fresh.ok()) {
        fresh = RefuseToReplaceCredentials(out_dir_ + "/tokens",
                                           JobTokenFiles(), "a job's tokens");
      }
      if (!fresh.ok()) {
        err << "psctl tfconfig gen: " << fresh.message() << "\n";
        return kExitFailed;
      }
    }
    if (days_ < 1 || days_ > 3650) {
      err << "psctl tfconfig gen: --days=" << days_ << " is outside 1..3650\n";
      return kExitUsage;
    }
    if (!out_dir_.empty()) {
      if (absl::Status made = MakeDirectories(out_dir_); !made.ok()) {
        err << "psctl tfconfig gen: " << made.message() << "\n";
        return kExitFailed;
      }
    }
    for (const auto& [task, json] : *configs) {
      if (out_dir_.empty()) {
        out << "# " << task.ToString() << "\nexport TF_CONFIG='" << json
            << "'\n";
        continue;
      }
      const std::string path =
          absl::StrCat(out_dir_, "/", task.ToString(), ".json");
      if (absl::Status written = WriteFileAtomically(path, json + "\n");
          !written.ok()) {
        err << "psctl tfconfig gen: " << written.message() << "\n";
        return kExitFailed;
      }
      out << path << "\n";
    }
    if (credentials_) {
      if (absl::Status written = WriteCredentials(configs->front().second, out);
          !written.ok()) {
        err << "psctl tfconfig gen: " << written.message() << "\n";
        return kExitFailed;
      }
    }
    return kExitOk;
  }

 private:
  // Certificates naming every task's host, and fresh tokens, beside the
  // TF_CONFIG files.
  absl::Status WriteCredentials(const std::string& any_tf_config,
                                std::ostream& out) {
    ASSIGN_OR_RETURN(TfConfig config, ParseTfConfig(any_tf_config));
    ASSIGN_OR_RETURN(
        JobCertificates certificates,
        MakeJobCertificates(config.cluster, job_, absl::Hours(24) * days_));
    const std::string tls_dir = out_dir_ + "/tls";
    RETURN_IF_ERROR(WriteJobCertificates(certificates, tls_dir,
                                         SecretOptions{"psflow-tls"}));
    ASSIGN_OR_RETURN(auto tokens, GenerateJobTokens());
    const std::string token_dir = out_dir_ + "/tokens";
    RETURN_IF_ERROR(WriteJobTokens(tokens, token_dir));
    RETURN_IF_ERROR(WriteFileWithMode(
        token_dir + "/secret.yaml",
        JobTokensSecret(tokens, SecretOptions{"psflow-tokens"}), 0600));
    const std::string tasks_dir = out_dir_ + "/tasks";
    RETURN_IF_ERROR(WriteTaskCredentials(config, tls_dir, tokens, tasks_dir));
    out << "wrote the job's certificates to " << tls_dir
        << " and its tokens to " << token_dir << " (all of them, with "
        << tls_dir << "/ca.key and " << token_dir
        << "/admin.token: keep these off the cluster; psctl uses them), and "
           "what each task needs to "
        << tasks_dir
        << "/<task>: copy that folder alone to the task's host and start the "
           "task with --tls_dir=<folder>/tls --token_dir=<folder>/tokens\n";
    return absl::OkStatus();
  }

  TfConfigGenOptions options_;
  std::string out_dir_;
  bool credentials_ = false;
  bool overwrite_ = false;
  std::string job_ = "psflow";
  int days_ = 365;
};

}  // namespace

std::unique_ptr<Subcommand> NewTfConfigCheckCommand() {
  return std::make_unique<TfConfigCheckCommand>();
}

std::unique_ptr<Subcommand> NewTfConfigGenCommand() {
  return std::make_unique<TfConfigGenCommand>();
}

}  // namespace psflow
