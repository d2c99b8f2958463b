#include "client/psctl/flag_set.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace psflow {
namespace {

bool IsValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '_') {
      return false;
    }
  }
  return true;
}

// `text` as lines of at most 80 columns (longer words stay whole), each
// indented by six spaces.
std::string WrapIndented(absl::string_view text) {
  constexpr size_t kWidth = 80;
  constexpr absl::string_view kIndent = "      ";
  std::string out;
  std::string line(kIndent);
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (line.size() > kIndent.size() &&
        line.size() + 1 + word.size() > kWidth) {
      absl::StrAppend(&out, line, "\n");
      line = std::string(kIndent);
    }
    if (line.size() > kIndent.size()) line += ' ';
    absl::StrAppend(&line, word);
  }
  absl::StrAppend(&out, line, "\n");
  return out;
}

bool IsHelp(absl::string_view arg) {
  return arg == "--help" || arg == "-help" || arg == "-h";
}

}  // namespace

FlagSet::FlagSet(std::string command) : command_(std::move(command)) {}

void FlagSet::AddString(std::string name, std::string* field,
                        std::string help) {
  std::string default_text =
      field->empty() ? "" : absl::StrCat("\"", *field, "\"");
  Add(std::move(name), field, std::move(help), std::move(default_text));
}

void FlagSet::AddInt(std::string name, int* field, std::string help) {
  std::string default_text = absl::StrCat(*field);
  Add(std::move(name), field, std::move(help), std::move(default_text));
}

void FlagSet::AddBool(std::string name, bool* field, std::string help) {
  std::string default_text = *field ? "true" : "false";
  Add(std::move(name), field, std::move(help), std::move(default_text));
}

void FlagSet::AddStringList(std::string name, std::vector<std::string>* field,
                            std::string help) {
  std::string default_text = absl::StrJoin(*field, ",");
  Add(std::move(name), field, std::move(help), std::move(default_text));
}

void FlagSet::Add(std::string name, Field field, std::string help,
                  std::string default_text) {
  CHECK(IsValidName(name)) << "flag name \"" << name << "\"";
  CHECK(name != "help") << "--help is every FlagSet's own";
  CHECK(!Has(name)) << "--" << name << " registered twice for " << command_;
  flags_.push_back(
      Flag{std::move(name), field, std::move(help), std::move(default_text)});
}

bool FlagSet::Has(absl::string_view name) const {
  return Find(name) != nullptr;
}

std::vector<std::string> FlagSet::Names() const {
  std::vector<std::string> names;
  for (const Flag& flag : flags_) names.push_back(flag.name);
  return names;
}

const FlagSet::Flag* FlagSet::Find(absl::string_view name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

absl::Status FlagSet::UnknownFlag(absl::string_view name,
                                  const ElsewhereHint& elsewhere) const {
  std::string message = absl::StrCat(command_, ": unknown flag --", name);
  const std::string hint = elsewhere ? elsewhere(name) : "";
  if (!hint.empty()) absl::StrAppend(&message, " (", hint, ")");
  if (flags_.empty()) {
    absl::StrAppend(&message, "; ", command_, " takes no flags");
  } else {
    absl::StrAppend(
        &message, "; ", command_, " takes ",
        absl::StrJoin(flags_, ", ", [](std::string* out, const Flag& flag) {
          absl::StrAppend(out, "--", flag.name);
        }));
  }
  return absl::InvalidArgumentError(message);
}

absl::Status FlagSet::Set(const Flag& flag, absl::string_view value) const {
  if (auto* s = std::get_if<std::string*>(&flag.field)) {
    **s = std::string(value);
  } else if (auto* i = std::get_if<int*>(&flag.field)) {
    if (!absl::SimpleAtoi(value, *i)) {
      return absl::InvalidArgumentError(
          absl::StrCat(command_, ": --", flag.name, "=", value,
                       " is not an integer; give --", flag.name, "=<number>"));
    }
  } else if (auto* b = std::get_if<bool*>(&flag.field)) {
    if (!absl::SimpleAtob(value, *b)) {
      return absl::InvalidArgumentError(absl::StrCat(
          command_, ": --", flag.name, "=", value, " is not a boolean; give --",
          flag.name, ", --no", flag.name, " or --", flag.name, "=true|false"));
    }
  } else {
    std::vector<std::string> items = absl::StrSplit(value, ',');
    *std::get<std::vector<std::string>*>(flag.field) = std::move(items);
  }
  return absl::OkStatus();
}

absl::StatusOr<FlagSet::Parsed> FlagSet::Parse(
    const std::vector<std::string>& args,
    const ElsewhereHint& elsewhere) const {
  Parsed parsed;
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (IsHelp(arg)) {
      parsed.help = true;
      return parsed;
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      parsed.positional.insert(parsed.positional.end(), args.begin() + i + 1,
                               args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      parsed.positional.push_back(arg);
      continue;
    }
    absl::string_view body(arg);
    body.remove_prefix(absl::StartsWith(body, "--") ? 2 : 1);
    const size_t eq = body.find('=');
    const bool has_value = eq != absl::string_view::npos;
    const absl::string_view name = body.substr(0, eq);
    const absl::string_view value =
        has_value ? body.substr(eq + 1) : absl::string_view();
    if (!IsValidName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          command_, ": \"", arg, "\" is not a flag; flags are --name=value"));
    }
    const Flag* flag = Find(name);
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      // --nobool
      const Flag* negated = Find(name.substr(2));
      if (negated != nullptr && std::holds_alternative<bool*>(negated->field)) {
        if (has_value) {
          return absl::InvalidArgumentError(
              absl::StrCat(command_, ": --", name, " takes no value; give --",
                           name, " or --", negated->name, "=true|false"));
        }
        *std::get<bool*>(negated->field) = false;
        continue;
      }
      if (negated != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            command_, ": --", name, ": --", negated->name,
            " is not a boolean flag; give --", negated->name, "=<value>"));
      }
    }
    if (flag == nullptr) return UnknownFlag(name, elsewhere);
    if (auto* b = std::get_if<bool*>(&flag->field);
        b != nullptr && !has_value) {
      **b = true;
      continue;
    }
    if (has_value) {
      if (absl::Status set = Set(*flag, value); !set.ok()) return set;
      continue;
    }
    if (i + 1 == args.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(command_, ": --", name, " needs a value; give --", name,
                       "=<value> or --", name, " <value>"));
    }
    if (absl::Status set = Set(*flag, args[++i]); !set.ok()) return set;
  }
  return parsed;
}

std::string FlagSet::Help() const {
  std::string help;
  for (const Flag& flag : flags_) {
    absl::StrAppend(&help, "  --", flag.name);
    if (std::holds_alternative<std::string*>(flag.field)) {
      absl::StrAppend(&help, "=STRING");
    } else if (std::holds_alternative<int*>(flag.field)) {
      absl::StrAppend(&help, "=INT");
    } else if (std::holds_alternative<std::vector<std::string>*>(flag.field)) {
      absl::StrAppend(&help, "=A,B,...");
    } else {
      absl::StrAppend(&help, ", --no", flag.name);
    }
    if (!flag.default_text.empty()) {
      absl::StrAppend(&help, " (default ", flag.default_text, ")");
    }
    absl::StrAppend(&help, "\n", WrapIndented(flag.help));
  }
  return help;
}

}  // namespace psflow
