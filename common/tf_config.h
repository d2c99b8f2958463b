// TF_CONFIG: the cluster description every psflow process is started with.
//
// The format is TensorFlow's exactly, so Kubeflow's TFJob and existing TF
// tooling drive psflow unchanged:
//
//   {"cluster": {"chief": ["c0:2222"], "ps": ["p0:2222", "p1:2222"],
//                "worker": ["w0:2222", "w1:2222"]},
//    "task": {"type": "worker", "index": 1},
//    "rpc_layer": "grpc", "environment": "cloud"}
//
// Validation follows TensorFlow's rules (job names chief/ps/worker/evaluator,
// at most one chief and one evaluator, task index within its job, the
// evaluator may sit outside "cluster", at least one ps and one worker for
// training roles, no "chief" job means worker 0 is the chief) and adds the
// checks TF skips and then hangs on: duplicate addresses, bad ports, empty
// hosts. Every error names the key, the bad value and the fix.
// docs/configuration.md is the user-facing reference for this format.
#ifndef PSFLOW_COMMON_TF_CONFIG_H_
#define PSFLOW_COMMON_TF_CONFIG_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster_spec.h"
#include "common/task.h"

namespace psflow {

struct TfConfig {
  ClusterSpec cluster;
  TaskId task;  // This process's task.

  // Optional keys, accepted as TensorFlow accepts them.
  // "grpc", "grpc+tls" (mutual TLS required; common/rpc/security_flags.h)
  // or empty; others are rejected.
  std::string rpc_layer;
  std::string environment;     // e.g. "cloud"; informational only.
  std::string session_master;  // TF1 remnant; informational only.
  std::string trial;           // task.trial (hyperparameter tuning id).

  // Keys that were accepted but have no effect (unknown keys, empty jobs),
  // one sentence each, for processes to log at start-up.
  std::vector<std::string> warnings;

  // The task that runs the chief's duties: chief 0, or worker 0 when the
  // cluster has no "chief" job.
  TaskId ChiefTask() const;

  // The chief task's address, or FailedPrecondition naming the fix when
  // "cluster" lists neither a "chief" nor worker 0 (an evaluator's
  // TF_CONFIG may omit the cluster; a training task's may not).
  absl::StatusOr<std::string> ChiefAddress() const;

  // True when this task runs the chief's duties.
  bool IsChief() const;

  // This task's own address; nullopt only for an evaluator that is not
  // listed in "cluster" (TF allows that).
  std::optional<std::string> TaskAddress() const;
};

// Parses and validates a TF_CONFIG JSON document. Port 0 is allowed in the
// task's own entry only (it binds a free port; peers could not dial it).
// Returns InvalidArgument with a message starting "TF_CONFIG: " on any
// problem.
absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json);

}  // namespace psflow

#endif  // PSFLOW_COMMON_TF_CONFIG_H_
