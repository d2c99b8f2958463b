#include "common/task.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace psflow {

absl::string_view TaskTypeName(TaskType type) {
  switch (type) {
    case TaskType::kChief:
      return "chief";
    case TaskType::kPs:
      return "ps";
    case TaskType::kWorker:
      return "worker";
    case TaskType::kEvaluator:
      return "evaluator";
  }
  return "unknown";
}

std::optional<TaskType> ParseTaskType(absl::string_view name) {
  for (TaskType type : kAllTaskTypes) {
    if (TaskTypeName(type) == name) return type;
  }
  return std::nullopt;
}

std::string TaskId::ToString() const {
  return absl::StrCat(TaskTypeName(type), "-", index);
}

std::optional<TaskId> ParseTaskName(absl::string_view name) {
  const size_t dash = name.rfind('-');
  if (dash == absl::string_view::npos) return std::nullopt;
  std::optional<TaskType> type = ParseTaskType(name.substr(0, dash));
  int index = 0;
  if (!type.has_value() || !absl::SimpleAtoi(name.substr(dash + 1), &index) ||
      index < 0 || TaskId{*type, index}.ToString() != name) {
    return std::nullopt;
  }
  return TaskId{*type, index};
}

}  // namespace psflow
