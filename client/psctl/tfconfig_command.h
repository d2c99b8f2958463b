// `psctl tfconfig check` and `psctl tfconfig gen`: their flags and what
// they run (tfconfig_report.h, tfconfig_gen.h).
#ifndef PSFLOW_CLIENT_PSCTL_TFCONFIG_COMMAND_H_
#define PSFLOW_CLIENT_PSCTL_TFCONFIG_COMMAND_H_

#include <memory>

#include "client/psctl/subcommand.h"

namespace psflow {

// Validates TF_CONFIG (--tf_config or the environment) and prints the
// report; exits 1 naming the problem.
std::unique_ptr<Subcommand> NewTfConfigCheckCommand();

// The TF_CONFIG of every task from host lists (--chief, --ps, --workers,
// --evaluator, --port), as `export TF_CONFIG=...` lines or, with --out, one
// <out>/<task>.json per task. A bad cluster is a usage error (2); a file
// that cannot be written exits 1.
std::unique_ptr<Subcommand> NewTfConfigGenCommand();

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_TFCONFIG_COMMAND_H_
