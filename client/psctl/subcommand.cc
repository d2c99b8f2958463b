#include "client/psctl/subcommand.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace psflow {
namespace {

std::string Indent(absl::string_view text, absl::string_view by) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!line.empty()) absl::StrAppend(&out, by, line, "\n");
  }
  return out;
}

// "a", "a and b", "a, b and c".
std::string JoinAnd(const std::vector<std::string>& items) {
  if (items.size() <= 1) return absl::StrJoin(items, "");
  return absl::StrCat(absl::StrJoin(items.begin(), items.end() - 1, ", "),
                      " and ", items.back());
}

// The subcommand whose name is the longest run of leading words of `args`.
Subcommand* Find(const Subcommands& commands,
                 const std::vector<std::string>& args) {
  Subcommand* found = nullptr;
  size_t found_words = 0;
  for (const auto& command : commands) {
    const std::vector<std::string> words = absl::StrSplit(command->name(), ' ');
    if (words.size() <= found_words || words.size() > args.size()) continue;
    if (std::equal(words.begin(), words.end(), args.begin())) {
      found = command.get();
      found_words = words.size();
    }
  }
  return found;
}

// "a flag of psctl x and psctl y" for the subcommands taking --`flag`.
std::string OwnersOf(const Subcommands& commands, absl::string_view flag) {
  std::vector<std::string> owners;
  for (const auto& command : commands) {
    if (command->flags().Has(flag)) {
      owners.push_back(absl::StrCat("psctl ", command->name()));
    }
  }
  return owners.empty() ? "" : absl::StrCat("a flag of ", JoinAnd(owners));
}

std::string ArgumentCountError(const Subcommand& command,
                               const std::vector<std::string>& positional) {
  const std::string prefix = absl::StrCat("psctl ", command.name(), ": ");
  if (command.arguments().empty()) {
    return absl::StrCat(prefix, "unexpected argument \"", positional[0],
                        "\"; it takes only flags");
  }
  std::string message = absl::StrCat(
      prefix, "takes ", absl::StrJoin(command.arguments(), " "), "; got ",
      positional.size(), positional.size() == 1 ? " argument" : " arguments");
  if (!positional.empty()) {
    absl::StrAppend(&message, " (\"", absl::StrJoin(positional, "\" \""),
                    "\")");
  }
  return message;
}

int UsageError(const Subcommand& command, absl::string_view message,
               std::ostream& err) {
  err << message << "\n\nUsage:\n"
      << command.Summary() << "`psctl " << command.name()
      << " --help` lists its flags and their defaults.\n";
  return kExitUsage;
}

}  // namespace

Subcommand::Subcommand(std::string name, std::vector<std::string> arguments,
                       std::string synopsis, std::string description)
    : name_(std::move(name)),
      arguments_(std::move(arguments)),
      synopsis_(std::move(synopsis)),
      description_(std::move(description)),
      flags_(absl::StrCat("psctl ", name_)) {}

std::string Subcommand::Summary() const {
  return absl::StrCat(Indent(synopsis_, "  "), Indent(description_, "      "));
}

std::string Subcommand::Help() const {
  std::string help = absl::StrCat("Usage:\n", Summary(), "\n");
  if (flags_.Names().empty()) {
    absl::StrAppend(&help, "psctl ", name_, " takes no flags.\n");
  } else {
    absl::StrAppend(&help, "Flags:\n", flags_.Help());
  }
  return help;
}

std::string PsctlUsage(const Subcommands& commands) {
  std::string usage = "psctl: operate psflow clusters.\n\nUsage:\n";
  for (const auto& command : commands) {
    absl::StrAppend(&usage, command->Summary());
  }
  absl::StrAppend(
      &usage,
      "\nEach subcommand takes only its own flags; `psctl <subcommand> "
      "--help`\nlists them. Exit status: 0 success, 1 the command "
      "failed, 2 usage error.\n");
  return usage;
}

int RunPsctl(const Subcommands& commands, const std::vector<std::string>& args,
             std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << PsctlUsage(commands);
    return kExitUsage;
  }
  if (args[0] == "--help" || args[0] == "-help" || args[0] == "-h" ||
      args[0] == "help") {
    out << PsctlUsage(commands);
    return kExitOk;
  }
  Subcommand* command = Find(commands, args);
  if (command == nullptr) {
    if (args[0][0] == '-') {
      err << "psctl: flags go after the subcommand's name (psctl "
             "<subcommand> --flag=value), not before; got \""
          << args[0] << "\" first\n\n"
          << PsctlUsage(commands);
      return kExitUsage;
    }
    std::vector<std::string> words;
    for (const std::string& arg : args) {
      if (!arg.empty() && arg[0] == '-') break;
      words.push_back(arg);
    }
    err << "psctl: unknown command \"" << absl::StrJoin(words, " ") << "\"\n\n"
        << PsctlUsage(commands);
    return kExitUsage;
  }
  const size_t name_words =
      std::vector<std::string>(absl::StrSplit(command->name(), ' ')).size();
  // Where else an unknown flag belongs, so that the message can say so.
  auto elsewhere = [&](absl::string_view flag) {
    return OwnersOf(commands, flag);
  };
  absl::StatusOr<FlagSet::Parsed> parsed = command->flags().Parse(
      std::vector<std::string>(args.begin() + name_words, args.end()),
      elsewhere);
  if (!parsed.ok()) return UsageError(*command, parsed.status().message(), err);
  if (parsed->help) {
    out << command->Help();
    return kExitOk;
  }
  const std::vector<std::string>& positional = parsed->positional;
  if (positional.size() != command->arguments().size()) {
    return UsageError(*command, ArgumentCountError(*command, positional), err);
  }
  return command->Run(positional, out, err);
}

}  // namespace psflow
