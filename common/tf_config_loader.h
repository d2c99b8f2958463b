// Where a process's TF_CONFIG comes from. Every role binary and psctl use
// this one module, so `--tf_config` and the TF_CONFIG environment variable
// behave the same everywhere:
//
//   * `--tf_config` set: inline JSON when it starts with '{', else a path to
//     a file holding the JSON. It wins over the environment variable.
//   * otherwise the TF_CONFIG environment variable (JSON, as TensorFlow and
//     Kubeflow set it).
#ifndef PSFLOW_COMMON_TF_CONFIG_LOADER_H_
#define PSFLOW_COMMON_TF_CONFIG_LOADER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tf_config.h"

namespace psflow {

struct LoadedTfConfig {
  TfConfig config;
  // Where it was read from, for logs: "the TF_CONFIG environment
  // variable", "file /etc/tf_config.json" or "--tf_config (inline JSON)".
  std::string source;
};

// Loads from `flag_value` (the --tf_config flag, possibly empty) or
// `env_value` (TF_CONFIG, nullopt when unset). Errors name the source: a
// missing or unreadable file is NotFound/FailedPrecondition, an absent
// configuration or bad JSON is InvalidArgument.
absl::StatusOr<LoadedTfConfig> LoadTfConfig(
    absl::string_view flag_value, const std::optional<std::string>& env_value);

// As above with the process's own TF_CONFIG environment variable.
absl::StatusOr<LoadedTfConfig> LoadTfConfigFromFlagOrEnvironment(
    absl::string_view flag_value);

}  // namespace psflow

#endif  // PSFLOW_COMMON_TF_CONFIG_LOADER_H_
