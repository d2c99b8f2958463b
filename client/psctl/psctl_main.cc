// psctl: the operator's command-line tool.
//
//   psctl tfconfig check [--tf_config=<file or JSON>]
//   psctl tfconfig gen --chief=... --ps=... --workers=... [--out=DIR]
//   psctl config check <job.json> [--ps=N] [--workers=M]
//   psctl k8s render --image=IMAGE [--ps=N] [--workers=M] ...
//   psctl local --job=<file> --ps=N --workers=M [--evaluator] --dir=<dir>
//   psctl status [--chief=HOST:PORT | --tf_config=...] [--watch]
//   psctl certs gen --out=DIR [--tf_config=...]
//   psctl tokens gen --out=DIR
//   psctl ckpt list|inspect|verify|export|restore ...
//   psctl data synth-ctr --out_dir=DIR [--train_examples=N] ...
//
// Each subcommand lives with its own flags in a *_command.cc file
// (subcommand.h); this file only lists them and dispatches. Exit status:
// 0 success, 1 the command failed (the message says why), 2 usage error.
#include <iostream>
#include <string>
#include <vector>

#include "client/psctl/certs_command.h"
#include "client/psctl/ckpt_commands.h"
#include "client/psctl/config_command.h"
#include "client/psctl/data_command.h"
#include "client/psctl/k8s_command.h"
#include "client/psctl/local_command.h"
#include "client/psctl/status_command.h"
#include "client/psctl/subcommand.h"
#include "client/psctl/tfconfig_command.h"
#include "client/psctl/tokens_command.h"

namespace psflow {
namespace {

// In the order psctl's usage lists them.
Subcommands AllSubcommands() {
  Subcommands commands;
  commands.push_back(NewTfConfigCheckCommand());
  commands.push_back(NewTfConfigGenCommand());
  commands.push_back(NewConfigCheckCommand());
  commands.push_back(NewK8sRenderCommand());
  commands.push_back(NewLocalCommand());
  commands.push_back(NewStatusCommand());
  commands.push_back(NewCertsGenCommand());
  commands.push_back(NewTokensGenCommand());
  commands.push_back(NewCkptListCommand());
  commands.push_back(NewCkptInspectCommand());
  commands.push_back(NewCkptVerifyCommand());
  commands.push_back(NewCkptExportCommand());
  commands.push_back(NewCkptRestoreCommand());
  commands.push_back(NewDataSynthCtrCommand());
  return commands;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  return psflow::RunPsctl(psflow::AllSubcommands(),
                          std::vector<std::string>(argv + 1, argv + argc),
                          std::cout, std::cerr);
}
