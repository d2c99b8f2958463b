#include "common/role_help.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psflow {

bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "-h" ||
        absl::StartsWith(arg, "--help=")) {
      return true;
    }
  }
  return false;
}

void PrintRoleHelp(absl::string_view usage, std::ostream& out) {
  out << usage << "\n\nFlags:\n";
  std::vector<std::pair<std::string, const absl::CommandLineFlag*>> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    // abseil's own (--flagfile, --help...) stay out; psflow's are in.
    if (absl::StrContains(flag->Filename(), "absl/")) continue;
    flags.emplace_back(std::string(name), flag);
  }
  std::sort(flags.begin(), flags.end());
  for (const auto& [name, flag] : flags) {
    const std::string default_value = flag->DefaultValue();
    out << "  --" << name
        << "  (default: " << (default_value.empty() ? "\"\"" : default_value)
        << ")\n      " << flag->Help() << "\n";
  }
  out << "\nSecurity: a task without --tls_dir or --token_dir refuses to "
         "start unless --allow_unauthenticated_callers is given "
         "(docs/operations.md, \"Security\").\n";
}

void HandleHelpRequest(int argc, char** argv, absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  if (!AsksForHelp(argc, argv)) return;
  PrintRoleHelp(usage, std::cout);
  std::cout.flush();
  std::exit(0);
}

}  // namespace psflow
