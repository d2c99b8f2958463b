// The `cluster` part of a TF_CONFIG: which address every task listens on.
//
// Jobs are kept by index so that TensorFlow's sparse form
// ({"worker": {"1": "host:port"}}) and the usual list form share one shape;
// list jobs simply have indexes 0..n-1. Immutable after construction and
// therefore safe to share between threads.
#ifndef PSFLOW_COMMON_CLUSTER_SPEC_H_
#define PSFLOW_COMMON_CLUSTER_SPEC_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/task.h"

namespace psflow {

class ClusterSpec {
 public:
  using Job = std::map<int, std::string>;  // index -> "host:port"

  ClusterSpec() = default;
  explicit ClusterSpec(std::map<TaskType, Job> jobs);

  // True when the job has at least one task.
  bool HasJob(TaskType type) const;

  // The tasks of `type`; empty when the job is absent.
  const Job& job(TaskType type) const;

  // Number of tasks defined for `type` (for sparse jobs, not max index + 1).
  int NumTasks(TaskType type) const;

  // True when the job is given in TF's sparse form with gaps in its indexes.
  bool IsSparse(TaskType type) const;

  // The address of `task`, or nullopt when the cluster does not list it.
  std::optional<std::string> Address(const TaskId& task) const;

  // Every task with its address: chief, ps, worker, evaluator; by index.
  std::vector<std::pair<TaskId, std::string>> Tasks() const;

 private:
  std::map<TaskType, Job> jobs_;  // Only non-empty jobs.
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_CLUSTER_SPEC_H_
