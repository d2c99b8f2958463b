// `psctl tfconfig gen`: the TF_CONFIG of every task of a cluster, from its
// host lists, so operators can start one role binary per host.
#ifndef PSFLOW_CLIENT_PSCTL_TFCONFIG_GEN_H_
#define PSFLOW_CLIENT_PSCTL_TFCONFIG_GEN_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/task.h"

namespace psflow {

// The TF_CONFIG JSON of `task` in a cluster of `addresses` per job (every
// job listed in the cluster, the evaluator's included).
std::string BuildTfConfigJson(
    const std::map<TaskType, std::vector<std::string>>& addresses,
    const TaskId& task);

struct TfConfigGenOptions {
  // "host" or "host:port"; a host alone gets `default_port`.
  std::string chief;  // optional: without it worker 0 is the chief
  std::vector<std::string> ps;
  std::vector<std::string> workers;
  std::string evaluator;    // optional
  int default_port = 2222;  // TensorFlow's and TFJob's
};

// One (task, TF_CONFIG) per task: chief, ps 0.., workers 0.., evaluator.
// Each is checked by the same parser every role uses; InvalidArgument
// names a bad or repeated address.
absl::StatusOr<std::vector<std::pair<TaskId, std::string>>> GenerateTfConfigs(
    const TfConfigGenOptions& options);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_TFCONFIG_GEN_H_
