#include "common/task.h"

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

}  // namespace psflow
