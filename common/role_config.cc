#include "common/role_config.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/tf_config_loader.h"

namespace psflow {

absl::StatusOr<TfConfig> LoadRoleConfig(absl::string_view tf_config_flag,
                                        TaskType role, absl::string_view binary,
                                        absl::string_view hint) {
  absl::StatusOr<LoadedTfConfig> loaded =
      LoadTfConfigFromFlagOrEnvironment(tf_config_flag);
  if (!loaded.ok()) return loaded.status();
  const TfConfig& config = loaded->config;
  if (config.task.type != role) {
    return absl::InvalidArgumentError(
        absl::StrCat(binary, " runs \"", TaskTypeName(role),
                     "\" tasks, but TF_CONFIG (from ", loaded->source,
                     ") names task ", config.task.ToString(), "; start the ",
                     TaskTypeName(config.task.type), " binary for it", hint));
  }
  SetLogTag(config.task.ToString());
  for (const std::string& warning : config.warnings) {
    LOG(WARNING) << "TF_CONFIG: " << warning;
  }
  return config;
}

}  // namespace psflow
