// A psctl subcommand ("tfconfig gen", "ckpt inspect", ...): its name, the
// positional arguments it requires, its own FlagSet bound to its own
// options, and what it does; and RunPsctl, which picks the subcommand named
// on the command line, parses that subcommand's flags only and runs it.
//
// Exit status, for every subcommand: 0 success, 1 the command failed (the
// message says why), 2 usage error (no or unknown subcommand, a flag that is
// not the subcommand's, a bad flag value, the wrong number of arguments).
//
// Not thread-safe; a Subcommand is built, run once and dropped.
#ifndef PSFLOW_CLIENT_PSCTL_SUBCOMMAND_H_
#define PSFLOW_CLIENT_PSCTL_SUBCOMMAND_H_

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "client/psctl/flag_set.h"

namespace psflow {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

class Subcommand {
 public:
  // `name`: the words after `psctl`, e.g. "ckpt inspect". `arguments`:
  // placeholders of its positional arguments, all required, e.g.
  // {"<dir>/ckpt-<step>"}. `synopsis`: its usage line(s), starting
  // "psctl <name>"; `description`: what it does, one or more lines.
  Subcommand(std::string name, std::vector<std::string> arguments,
             std::string synopsis, std::string description);
  virtual ~Subcommand() = default;
  Subcommand(const Subcommand&) = delete;
  Subcommand& operator=(const Subcommand&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<std::string>& arguments() const { return arguments_; }
  const FlagSet& flags() const { return flags_; }

  // The synopsis indented by 2 and the description by 6, as psctl's usage
  // lists it.
  std::string Summary() const;
  // The summary, then every flag with its default and help.
  std::string Help() const;

  // Runs once the flags have set the subclass's options; `arguments` holds
  // exactly as many as were declared. Returns the exit status.
  virtual int Run(const std::vector<std::string>& arguments, std::ostream& out,
                  std::ostream& err) = 0;

 protected:
  // Subclasses register their flags, bound to their own members, in their
  // constructors.
  FlagSet& mutable_flags() { return flags_; }

 private:
  const std::string name_;
  const std::vector<std::string> arguments_;
  const std::string synopsis_;
  const std::string description_;
  FlagSet flags_;
};

using Subcommands = std::vector<std::unique_ptr<Subcommand>>;

// psctl's usage: what it is, then every subcommand's summary.
std::string PsctlUsage(const Subcommands& commands);

// Runs `psctl <args...>` (`args` without the program's name) with the
// subcommand whose name the first words of `args` are; everything after
// the name goes to that subcommand's FlagSet. `--help` prints psctl's usage
// (first) or the subcommand's help (after its name) to `out` and returns 0.
// Usage errors print the reason and the relevant usage to `err` and return
// 2; otherwise it returns what the subcommand's Run returns.
int RunPsctl(const Subcommands& commands, const std::vector<std::string>& args,
             std::ostream& out, std::ostream& err);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_SUBCOMMAND_H_
