#include "common/path_name.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

constexpr char kRule[] =
    "use 1 to 128 letters, digits, '.', '_' and '-', other than \".\" and "
    "\"..\" (the name becomes a folder name)";

bool Allowed(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

absl::Status CheckPathName(absl::string_view name, absl::string_view what) {
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is empty; ", kRule));
  }
  if (name.size() > kMaxPathNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", absl::CHexEscape(name.substr(0, 32)),
                     "...\" is ", name.size(), " bytes long; ", kRule));
  }
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", name, "\" would name a folder above or at ",
                     "the one it belongs in; ", kRule));
  }
  for (char c : name) {
    if (!Allowed(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " \"", absl::CHexEscape(name), "\" contains '",
          absl::CHexEscape(absl::string_view(&c, 1)), "'; ", kRule));
    }
  }
  return absl::OkStatus();
}

}  // namespace psflow
