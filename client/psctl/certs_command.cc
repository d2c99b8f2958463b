#include "client/psctl/certs_command.h"

#include <ostream>
#include <string>
#include <vector>

#include "client/psctl/existing_credentials.h"
#include "client/psctl/job_certificates.h"
#include "common/tf_config_loader.h"

namespace psflow {
namespace {

class CertsGenCommand : public Subcommand {
 public:
  CertsGenCommand()
      : Subcommand(
            "certs gen", {},
            "psctl certs gen --out=DIR [--tf_config=<file or JSON>] "
            "[--job=NAME]\n"
            "                [--days=365] [--secret_name=psflow-tls] "
            "[--namespace=default] [--overwrite]",
            "A job's mutual-TLS files: a new CA, a certificate and key per\n"
            "task of the TF_CONFIG's cluster (named by task, valid for its\n"
            "host), one for psctl, and secret.yaml (a Kubernetes Secret).\n"
            "Give every task --tls_dir=DIR (or mount the Secret there); keep\n"
            "ca.key off the cluster.") {
    FlagSet& flags = mutable_flags();
    flags.AddString("out", &out_, "directory for the files (required)");
    flags.AddString("tf_config", &tf_config_,
                    "any task's TF_CONFIG as inline JSON or a file; default "
                    "$TF_CONFIG");
    flags.AddString("job", &job_, "the job's name, in the certificates");
    flags.AddInt("days", &days_, "how long the certificates are valid");
    flags.AddString("secret_name", &secret_.name,
                    "the Kubernetes Secret's name");
    flags.AddString("namespace", &secret_.namespace_name,
                    "the Kubernetes Secret's namespace");
    flags.AddBool("overwrite", &overwrite_,
                  "replace the CA and certificates a folder already holds");
  }

  int Run(const std::vector<std::string>&, std::ostream& out,
          std::ostream& err) override {
    if (out_.empty()) {
      err << "psctl certs gen: --out=DIR is required\n";
      return kExitUsage;
    }
    if (days_ < 1 || days_ > 3650) {
      err << "psctl certs gen: --days=" << days_ << " is outside 1..3650\n";
      return kExitUsage;
    }
    if (!overwrite_) {
      std::vector<std::string> names = JobCaFiles();
      names.push_back("secret.yaml");
      if (absl::Status fresh =
              RefuseToReplaceCredentials(out_, names, "a job's CA");
          !fresh.ok()) {
        err << "psctl certs gen: " << fresh.message() << "\n";
        return kExitFailed;
      }
    }
    absl::StatusOr<LoadedTfConfig> loaded =
        LoadTfConfigFromFlagOrEnvironment(tf_config_);
    if (!loaded.ok()) {
      err << "psctl certs gen: " << loaded.status().message() << "\n";
      return kExitFailed;
    }
    absl::StatusOr<JobCertificates> certificates = MakeJobCertificates(
        loaded->config.cluster, job_, absl::Hours(24) * days_);
    if (!certificates.ok()) {
      err << "psctl certs gen: " << certificates.status().message() << "\n";
      return kExitFailed;
    }
    if (absl::Status written =
            WriteJobCertificates(*certificates, out_, secret_);
        !written.ok()) {
      err << "psctl certs gen: " << written.message() << "\n";
      return kExitFailed;
    }
    out << "wrote the CA and " << certificates->tasks.size()
        << " certificates (every task's and psctl's) to " << out_ << ", and "
        << out_ << "/secret.yaml; start every task with --tls_dir=" << out_
        << " (keep " << out_ << "/ca.key off the cluster)\n";
    return kExitOk;
  }

 private:
  std::string out_;
  std::string tf_config_;
  std::string job_ = "psflow";
  int days_ = 365;
  bool overwrite_ = false;
  SecretOptions secret_{"psflow-tls", "default"};
};

}  // namespace

std::unique_ptr<Subcommand> NewCertsGenCommand() {
  return std::make_unique<CertsGenCommand>();
}

}  // namespace psflow
