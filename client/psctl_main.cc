// psctl: the operator's command-line tool.
//
//   psctl tfconfig check [--tf_config=<file or JSON>]
//
// More subcommands (local clusters, checkpoints, deployment) join as the
// features behind them land. Exit status: 0 success, 1 the command failed
// (the message says why), 2 usage error.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "client/tfconfig_report.h"
#include "common/tf_config_loader.h"

ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG as inline JSON or a path to a JSON file; defaults to the "
          "TF_CONFIG environment variable");

namespace psflow {
namespace {

constexpr char kUsage[] =
    "psctl: operate psflow clusters.\n"
    "\n"
    "Usage:\n"
    "  psctl tfconfig check [--tf_config=<file or JSON>]\n"
    "      Validate this process's TF_CONFIG (environment variable or flag),\n"
    "      print its task, whether it acts as chief, and every peer.\n";

int RunTfConfigCheck() {
  absl::StatusOr<LoadedTfConfig> loaded =
      LoadTfConfigFromFlagOrEnvironment(absl::GetFlag(FLAGS_tf_config));
  if (!loaded.ok()) {
    std::cerr << "psctl tfconfig check: " << loaded.status().message() << "\n";
    return 1;
  }
  std::cout << FormatTfConfigReport(*loaded);
  return 0;
}

int UsageError(const std::vector<std::string>& args) {
  std::cerr << "psctl: unknown command \"" << absl::StrJoin(args, " ")
            << "\"\n\n"
            << kUsage;
  return 2;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  std::vector<std::string> args(positional.begin() + 1, positional.end());
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  if (args == std::vector<std::string>{"tfconfig", "check"}) {
    return RunTfConfigCheck();
  }
  return UsageError(args);
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) { return psflow::Main(argc, argv); }
