#include "chief/server_board.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

// Tensor bytes both ways, over TCP and shared memory.
int64_t TransferredBytes(const StatsResponse& s) {
  return s.bytes_received() + s.bytes_sent() + s.shared_memory_bytes();
}

}  // namespace

ServerBoard::ServerBoard(std::map<int, std::string> addresses) {
  for (auto& [index, address] : addresses) {
    servers_[index].address = std::move(address);
  }
}

void ServerBoard::RecordProbe(int index, const absl::Status& status,
                              absl::Time now) {
  MutexLock lock(&mu_);
  auto it = servers_.find(index);
  if (it == servers_.end()) return;
  it->second.last_error = status;
  if (status.ok()) it->second.last_answer = now;
}

void ServerBoard::RecordStats(
    const std::vector<absl::StatusOr<StatsResponse>>& stats, absl::Time now) {
  MutexLock lock(&mu_);
  // The client's servers are the TF_CONFIG's in index order, as here (a
  // sparse "ps" job has gaps in its indexes, not in this order).
  size_t i = 0;
  for (auto& [index, s] : servers_) {
    if (i >= stats.size()) break;
    const absl::StatusOr<StatsResponse>& answer = stats[i++];
    s.last_error = answer.status();
    if (!answer.ok()) continue;
    s.last_answer = now;
    s.previous_stats = std::move(s.stats);
    s.previous_stats_time = s.stats_time;
    s.stats = *answer;
    s.stats_time = now;
  }
}

void ServerBoard::RecordShutdown(const absl::Status& status, absl::Time now) {
  MutexLock lock(&mu_);
  for (auto& [index, s] : servers_) {
    s.shut_down = true;
    s.last_error = status;
    if (status.ok()) s.last_answer = now;
  }
}

std::vector<TaskView> ServerBoard::Views(absl::Time now) const {
  MutexLock lock(&mu_);
  std::vector<TaskView> views;
  for (const auto& [index, s] : servers_) {
    TaskView& v = views.emplace_back();
    v.set_task(absl::StrCat("ps-", index));
    v.set_address(s.address);
    v.set_seconds_since_contact(
        s.last_answer ? absl::ToDoubleSeconds(now - *s.last_answer) : -1);
    if (s.stats.has_value()) {
      v.set_resident_bytes(s.stats->resident_bytes());
      v.set_stale_gradients_dropped(s.stats->stale_gradients_dropped());
      v.set_variable_bytes(s.stats->total_elements() * 4);
      if (s.previous_stats.has_value() &&
          s.stats_time > s.previous_stats_time) {
        const int64_t bytes =
            TransferredBytes(*s.stats) - TransferredBytes(*s.previous_stats);
        // A restarted server counts from zero again.
        if (bytes >= 0) {
          v.set_bytes_per_sec(
              bytes /
              absl::ToDoubleSeconds(s.stats_time - s.previous_stats_time));
        }
      }
    }
    if (s.shut_down) {
      v.set_state(TaskView::FINISHED);
      v.set_detail(s.last_error.ok()
                       ? "told to stop by the chief"
                       : absl::StrCat("the chief's stop request failed: ",
                                      s.last_error.message()));
    } else if (!s.last_answer.has_value()) {
      v.set_state(TaskView::MISSING);
      v.set_detail(s.last_error.ok()
                       ? "the chief has not reached it yet"
                       : absl::StrCat("the chief cannot reach it yet: ",
                                      s.last_error.message()));
    } else if (!s.last_error.ok()) {
      v.set_state(TaskView::UNREACHABLE);
      v.set_detail(std::string(s.last_error.message()));
    } else {
      v.set_state(TaskView::SERVING);
      if (s.stats.has_value()) {
        v.set_detail(absl::StrCat(
            s.stats->num_variables(),
            s.stats->num_variables() == 1 ? " variable" : " variables"));
      }
    }
  }
  return views;
}

}  // namespace psflow
