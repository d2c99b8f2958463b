// `--help` for the role binaries: the usage line and every flag the role
// takes (its own and the shared security flags), each with its meaning and
// default, on stdout; exit status 0. (abseil's own --help lists only the
// main file's flags, hides the security ones and exits 1.)
#ifndef PSFLOW_COMMON_ROLE_HELP_H_
#define PSFLOW_COMMON_ROLE_HELP_H_

#include <ostream>

#include "absl/strings/string_view.h"

namespace psflow {

// Whether argv asks for help: --help, -help, -h or --help=... .
bool AsksForHelp(int argc, char** argv);

// The usage line, then every psflow flag linked into this binary, sorted.
void PrintRoleHelp(absl::string_view usage, std::ostream& out);

// Sets abseil's usage message to `usage`; when argv asks for help, prints
// it (PrintRoleHelp) and exits 0.
void HandleHelpRequest(int argc, char** argv, absl::string_view usage);

}  // namespace psflow

#endif  // PSFLOW_COMMON_ROLE_HELP_H_
