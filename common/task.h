// Task identity in a TF_CONFIG cluster: the four job names TensorFlow allows
// (chief, ps, worker, evaluator) and a task's (type, index).
#ifndef PSFLOW_COMMON_TASK_H_
#define PSFLOW_COMMON_TASK_H_

#include <optional>
#include <ostream>
#include <string>

#include "absl/strings/string_view.h"

namespace psflow {

// Declaration order is the order in which tasks are listed and started.
enum class TaskType { kChief, kPs, kWorker, kEvaluator };

inline constexpr TaskType kAllTaskTypes[] = {
    TaskType::kChief, TaskType::kPs, TaskType::kWorker, TaskType::kEvaluator};

// The TF_CONFIG job name: "chief", "ps", "worker" or "evaluator".
absl::string_view TaskTypeName(TaskType type);

// Parses a TF_CONFIG job name; nullopt for anything else (TF is
// case-sensitive here, and so are we).
std::optional<TaskType> ParseTaskType(absl::string_view name);

// One task of the cluster, e.g. {kWorker, 1}.
struct TaskId {
  TaskType type = TaskType::kWorker;
  int index = 0;

  // "worker-1": the form used in log tags and directory names.
  std::string ToString() const;

  friend bool operator==(const TaskId& a, const TaskId& b) {
    return a.type == b.type && a.index == b.index;
  }
  friend bool operator!=(const TaskId& a, const TaskId& b) { return !(a == b); }
  friend bool operator<(const TaskId& a, const TaskId& b) {
    return a.type != b.type ? a.type < b.type : a.index < b.index;
  }
  friend std::ostream& operator<<(std::ostream& os, const TaskId& task) {
    return os << task.ToString();
  }
};

// Parses a task's name as TaskId::ToString writes it ("worker-1"), and
// only that form (no sign, no leading zeros); nullopt for anything else.
std::optional<TaskId> ParseTaskName(absl::string_view name);

}  // namespace psflow

#endif  // PSFLOW_COMMON_TASK_H_
