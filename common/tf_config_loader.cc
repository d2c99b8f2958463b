#include "common/tf_config_loader.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace psflow {
namespace {

constexpr char kEnvironmentSource[] = "the TF_CONFIG environment variable";

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  // A TF_CONFIG lists addresses: far below this.
  constexpr int64_t kMaxTfConfigBytes = 1 << 20;
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxTfConfigBytes);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat("--tf_config: cannot read file \"", path, "\" (",
                     text.status().message(),
                     "); pass an existing file or inline JSON starting with "
                     "'{'"));
  }
  return text;
}

// Adds the source to a parse error so the user knows which input to fix.
absl::StatusOr<LoadedTfConfig> ParseFrom(absl::string_view json,
                                         std::string source) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(json);
  if (!config.ok()) {
    return absl::Status(
        config.status().code(),
        absl::StrCat(config.status().message(), " (read from ", source, ")"));
  }
  return LoadedTfConfig{*std::move(config), std::move(source)};
}

}  // namespace

absl::StatusOr<LoadedTfConfig> LoadTfConfig(
    absl::string_view flag_value, const std::optional<std::string>& env_value) {
  absl::string_view flag = absl::StripAsciiWhitespace(flag_value);
  if (!flag.empty()) {
    if (absl::StartsWith(flag, "{")) {
      return ParseFrom(flag, "--tf_config (inline JSON)");
    }
    std::string path(flag);
    absl::StatusOr<std::string> contents = ReadWholeFile(path);
    if (!contents.ok()) return contents.status();
    return ParseFrom(*contents, absl::StrCat("file ", path));
  }
  if (!env_value.has_value() ||
      absl::StripAsciiWhitespace(*env_value).empty()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG is not set: set the TF_CONFIG environment variable to the "
        "cluster's JSON, or pass --tf_config=<file or JSON> (psctl tfconfig "
        "gen writes one per task)");
  }
  if (!absl::StartsWith(absl::StripLeadingAsciiWhitespace(*env_value), "{")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TF_CONFIG must hold JSON starting with '{', got \"",
        env_value->substr(0, 80),
        "\"; to read the configuration from a file use --tf_config=<path>"));
  }
  return ParseFrom(*env_value, kEnvironmentSource);
}

absl::StatusOr<LoadedTfConfig> LoadTfConfigFromFlagOrEnvironment(
    absl::string_view flag_value) {
  const char* env = std::getenv("TF_CONFIG");
  std::optional<std::string> env_value;
  if (env != nullptr) env_value = env;
  return LoadTfConfig(flag_value, env_value);
}

}  // namespace psflow
