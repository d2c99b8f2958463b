#include "worker/sync_groups.h"

#include <algorithm>
#include <utility>

namespace psflow {

std::vector<std::vector<int>> ForwardGroups(
    const std::vector<LogicalVariable>& variables, int64_t group_bytes) {
  std::vector<std::vector<int>> groups;
  int64_t bytes = 0;
  for (size_t v = 0; v < variables.size(); ++v) {
    if (groups.empty() || bytes >= std::max<int64_t>(group_bytes, 1)) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(static_cast<int>(v));
    bytes += variables[v].num_elements() * static_cast<int64_t>(sizeof(float));
  }
  return groups;
}

PsHandles::PsHandles(std::shared_ptr<PsHandle> handle) {
  Add(std::move(handle));
}

void PsHandles::Add(std::shared_ptr<PsHandle> handle) {
  if (handle != nullptr) handles_.push_back(std::move(handle));
}

absl::Status PsHandles::Wait() {
  absl::Status first;
  for (const auto& handle : handles_) first.Update(handle->Wait());
  return first;
}

int64_t PsHandles::min_version() const {
  int64_t lowest = -1;
  for (const auto& handle : handles_) {
    const int64_t v = handle->min_version();
    if (v >= 0 && (lowest < 0 || v < lowest)) lowest = v;
  }
  return lowest;
}

int64_t PsHandles::worker_clock() const {
  int64_t highest = -1;
  for (const auto& handle : handles_) {
    highest = std::max(highest, handle->worker_clock());
  }
  return highest;
}

SyncPusher::SyncPusher(ParameterClient* client,
                       std::vector<LogicalVariable> variables,
                       int64_t group_bytes)
    : client_(client),
      variables_(std::move(variables)),
      group_bytes_(group_bytes) {}

void SyncPusher::Start(std::vector<absl::Span<const float>> gradients,
                       int64_t version, int worker) {
  Reset();
  gradients_ = std::move(gradients);
  version_ = version;
  worker_ = worker;
  pushed_.assign(variables_.size(), false);
}

void SyncPusher::Ready(int v) {
  if (v < 0 || v >= static_cast<int>(pushed_.size()) || pushed_[v]) return;
  pushed_[v] = true;
  pending_.push_back(v);
  pending_bytes_ +=
      variables_[v].num_elements() * static_cast<int64_t>(sizeof(float));
  if (pending_bytes_ >= group_bytes_) PushPending();
}

void SyncPusher::Flush() {
  // Backward's order: a model that reports nothing still pushes the last
  // layer's first.
  for (int v = static_cast<int>(pushed_.size()); v-- > 0;) {
    if (!pushed_[v]) {
      pushed_[v] = true;
      pending_.push_back(v);
    }
  }
  PushPending();
}

void SyncPusher::PushPending() {
  if (pending_.empty()) return;
  std::vector<ParameterClient::Const> group;
  group.reserve(pending_.size());
  for (int v : pending_) group.emplace_back(variables_[v].name, gradients_[v]);
  pushes_.push_back(client_->Push(group, version_, worker_));
  pending_.clear();
  pending_bytes_ = 0;
}

absl::Status SyncPusher::Wait() {
  absl::Status stale;
  absl::Status failed;
  for (const auto& push : pushes_) {
    absl::Status pushed = push->Wait();
    if (absl::IsAborted(pushed)) {
      stale.Update(pushed);
    } else {
      failed.Update(pushed);
    }
  }
  return failed.ok() ? stale : failed;
}

void SyncPusher::Reset() {
  pushes_.clear();
  pending_.clear();
  pending_bytes_ = 0;
  pushed_.assign(variables_.size(), false);
}

}  // namespace psflow
