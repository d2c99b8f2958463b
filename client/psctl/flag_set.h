// The flags of one psctl subcommand. Each subcommand registers its own
// typed flags, each bound to a field of its own options struct, so a name
// can mean different things to different subcommands (`--ps` is a count for
// `psctl local`, a host list for `psctl tfconfig gen`) and a flag given to
// the wrong subcommand is an error rather than silently ignored.
//
// Accepted forms, as absl flags accepted them: `--name=value`,
// `--name value` (not for booleans), `--bool`, `--nobool`,
// `--bool=true|false` (also 1/0, yes/no), one dash instead of two, and `--`
// ending the flags. Arguments not starting with '-' (and "-" itself) are
// positional and may come before, between or after the flags.
//
// Not thread-safe: register and parse from one thread. Not copyable: the
// bound fields are held by pointer and must outlive the FlagSet.
#ifndef PSFLOW_CLIENT_PSCTL_FLAG_SET_H_
#define PSFLOW_CLIENT_PSCTL_FLAG_SET_H_

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

class FlagSet {
 public:
  // `command` names the subcommand in messages, e.g. "psctl tfconfig gen".
  explicit FlagSet(std::string command);
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;

  // Each binds `--name` to `*field`; the field's value now is the flag's
  // default, shown by Help(). Names are lowercase letters, digits and '_',
  // unique within the set, and not "help" (CHECKed: they are ours, not
  // input).
  void AddString(std::string name, std::string* field, std::string help);
  void AddInt(std::string name, int* field, std::string help);
  void AddBool(std::string name, bool* field, std::string help);
  // A comma-separated list: `--ps=a,b` sets {"a", "b"}; `--ps=` sets {""}
  // so that the subcommand can name the empty entry.
  void AddStringList(std::string name, std::vector<std::string>* field,
                     std::string help);

  const std::string& command() const { return command_; }
  bool Has(absl::string_view name) const;
  // In registration order, without dashes.
  std::vector<std::string> Names() const;

  struct Parsed {
    // The arguments that are not flags, in order.
    std::vector<std::string> positional;
    // --help (or -h) was given: the caller prints the help and parses
    // nothing else; the fields are untouched.
    bool help = false;
  };
  // Given a flag name this set does not know, says where else it belongs
  // (e.g. "it is a flag of psctl local"), or "" when nowhere.
  using ElsewhereHint = std::function<std::string(absl::string_view name)>;

  // Sets the bound fields from `args` (the arguments after the subcommand's
  // name); a flag given twice keeps its last value. InvalidArgument names
  // the offending flag and this set's command: an unknown flag (with
  // `elsewhere`'s hint and this command's own flags), a missing value, a
  // value that is not a number or a boolean, or --noname of a flag that is
  // not a boolean. On error some fields may already be set.
  absl::StatusOr<Parsed> Parse(const std::vector<std::string>& args,
                               const ElsewhereHint& elsewhere = nullptr) const;

  // Per flag, "  --name=INT (default 1)" and its help below, indented and
  // wrapped at 80 columns; "" when the set has no flags.
  std::string Help() const;

 private:
  using Field =
      std::variant<std::string*, int*, bool*, std::vector<std::string>*>;
  struct Flag {
    std::string name;
    Field field;
    std::string help;
    std::string default_text;  // as Help() shows it; "" for none
  };

  void Add(std::string name, Field field, std::string help,
           std::string default_text);
  const Flag* Find(absl::string_view name) const;
  absl::Status UnknownFlag(absl::string_view name,
                           const ElsewhereHint& elsewhere) const;
  // Stores `value` (already split off the argument) into `flag`'s field.
  absl::Status Set(const Flag& flag, absl::string_view value) const;

  const std::string command_;
  std::vector<Flag> flags_;
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_FLAG_SET_H_
