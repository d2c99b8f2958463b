#include "client/psctl/image_reference.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace psflow {

absl::StatusOr<ImageReference> ParseImageReference(absl::string_view image,
                                                   absl::string_view flag) {
  for (char c : image) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-' &&
        c != '/' && c != ':' && c != '@') {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, "=", image,
          " is not an image reference: use [registry/]name[:tag][@digest], "
          "e.g. registry.example/psflow:1.2"));
    }
  }
  ImageReference out;
  absl::string_view rest = image;
  const size_t at = rest.find('@');
  if (at != absl::string_view::npos) {
    out.digest = std::string(rest.substr(at + 1));
    rest = rest.substr(0, at);
  }
  const size_t slash = rest.rfind('/');
  const size_t colon = rest.rfind(':');
  // A colon before the last slash is a registry's port, not a tag.
  const bool tagged = colon != absl::string_view::npos &&
                      (slash == absl::string_view::npos || colon > slash);
  if (tagged) {
    out.tag = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  out.name = std::string(rest);
  if (out.name.empty() || out.name.back() == '/' ||
      (tagged && out.tag.empty()) ||
      (at != absl::string_view::npos && out.digest.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", image,
                     " has an empty name, tag or digest: use "
                     "[registry/]name[:tag][@digest]"));
  }
  return out;
}

}  // namespace psflow
