// What every role binary does first with its TF_CONFIG: load it (flag or
// environment), check that it names a task this binary runs, tag log lines
// with the task, and log TF_CONFIG's warnings.
#ifndef PSFLOW_COMMON_ROLE_CONFIG_H_
#define PSFLOW_COMMON_ROLE_CONFIG_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/task.h"
#include "common/tf_config.h"

namespace psflow {

// `binary` names the program in errors ("ps_server"); `hint` is appended to
// the wrong-role error (may be empty).
absl::StatusOr<TfConfig> LoadRoleConfig(absl::string_view tf_config_flag,
                                        TaskType role, absl::string_view binary,
                                        absl::string_view hint = "");

}  // namespace psflow

#endif  // PSFLOW_COMMON_ROLE_CONFIG_H_
