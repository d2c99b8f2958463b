#include "client/psctl/tfconfig_command.h"

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/psctl/tfconfig_gen.h"
#include "client/psctl/tfconfig_report.h"
#include "common/file_util.h"
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
            "                   [--evaluator=HOST] [--port=2222] [--out=DIR]",
            "The TF_CONFIG of every task, as `export TF_CONFIG=...` lines or\n"
            "one DIR/<task>.json per task.") {
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
    return kExitOk;
  }

 private:
  TfConfigGenOptions options_;
  std::string out_dir_;
};

}  // namespace

std::unique_ptr<Subcommand> NewTfConfigCheckCommand() {
  return std::make_unique<TfConfigCheckCommand>();
}

std::unique_ptr<Subcommand> NewTfConfigGenCommand() {
  return std::make_unique<TfConfigGenCommand>();
}

}  // namespace psflow
