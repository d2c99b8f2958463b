#include "common/cluster_spec.h"

namespace psflow {

ClusterSpec::ClusterSpec(std::map<TaskType, Job> jobs) {
  for (auto& [type, job] : jobs) {
    if (!job.empty()) jobs_.emplace(type, std::move(job));
  }
}

bool ClusterSpec::HasJob(TaskType type) const { return jobs_.count(type) > 0; }

const ClusterSpec::Job& ClusterSpec::job(TaskType type) const {
  static const Job* const kEmpty = new Job;
  auto it = jobs_.find(type);
  return it == jobs_.end() ? *kEmpty : it->second;
}

int ClusterSpec::NumTasks(TaskType type) const {
  return static_cast<int>(job(type).size());
}

bool ClusterSpec::IsSparse(TaskType type) const {
  const Job& tasks = job(type);
  return !tasks.empty() &&
         tasks.rbegin()->first != static_cast<int>(tasks.size()) - 1;
}

std::optional<std::string> ClusterSpec::Address(const TaskId& task) const {
  const Job& tasks = job(task.type);
  auto it = tasks.find(task.index);
  if (it == tasks.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<TaskId, std::string>> ClusterSpec::Tasks() const {
  std::vector<std::pair<TaskId, std::string>> tasks;
  for (TaskType type : kAllTaskTypes) {
    for (const auto& [index, address] : job(type)) {
      tasks.push_back({TaskId{type, index}, address});
    }
  }
  return tasks;
}

}  // namespace psflow
