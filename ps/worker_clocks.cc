#include "ps/worker_clocks.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psflow {
namespace {

// Steps a worker may have partly pushed at once (its pushes overlap by a
// step or two); older partial steps are forgotten, so a client that never
// completes its steps cannot grow this without bound.
constexpr size_t kMaxPartialSteps = 64;

}  // namespace

WorkerClocks::WorkerClocks(int num_workers, int64_t max_staleness)
    : max_staleness_(max_staleness),
      clocks_(num_workers, 0),
      excluded_(num_workers, false),
      partial_(num_workers) {}

absl::Status WorkerClocks::Check(int worker, int64_t clock) const {
  MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(clocks_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_clock names worker ", worker, "; this job has ",
                     clocks_.size(), " workers (0..", clocks_.size() - 1, ")"));
  }
  if (clock < 0 || clock > kMaxClock) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_clock ", clock, " of worker ", worker,
                     " is outside [0, ", kMaxClock, "]"));
  }
  return absl::OkStatus();
}

std::optional<int64_t> WorkerClocks::SlowestLocked(int except) const {
  std::optional<int64_t> slowest;
  for (size_t i = 0; i < clocks_.size(); ++i) {
    if (excluded_[i] || static_cast<int>(i) == except) continue;
    slowest = std::min(slowest.value_or(clocks_[i]), clocks_[i]);
  }
  return slowest;
}

int WorkerClocks::SlowestWorkerLocked() const {
  int slowest = -1;
  for (size_t i = 0; i < clocks_.size(); ++i) {
    if (excluded_[i]) continue;
    if (slowest < 0 || clocks_[i] < clocks_[slowest]) {
      slowest = static_cast<int>(i);
    }
  }
  return slowest;
}

void WorkerClocks::CatchUpLocked(int worker) {
  std::optional<int64_t> others = SlowestLocked(worker);
  if (others.has_value()) {
    clocks_[worker] = std::max(clocks_[worker], *others);
  }
}

std::vector<std::function<void()>> WorkerClocks::ReleaseLocked() {
  std::vector<std::function<void()>> ready;
  if (waiters_.empty()) return ready;
  // No live worker: nothing bounds anyone.
  const int64_t slowest = SlowestLocked(-1).value_or(kMaxClock);
  auto released = std::stable_partition(
      waiters_.begin(), waiters_.end(),
      [slowest](const Waiter& w) { return w.needed > slowest; });
  for (auto it = released; it != waiters_.end(); ++it) {
    ready.push_back(std::move(it->ready));
  }
  waiters_.erase(released, waiters_.end());
  return ready;
}

int64_t WorkerClocks::Join(int worker, int64_t clock) {
  std::vector<std::function<void()>> ready;
  int64_t joined;
  {
    MutexLock lock(&mu_);
    excluded_[worker] = false;
    clocks_[worker] = std::max(clocks_[worker], clock);
    CatchUpLocked(worker);
    joined = clocks_[worker];
    // Raising a clock can only release waiters (and a returning worker
    // may now be the slowest: then nobody is released).
    ready = ReleaseLocked();
  }
  for (auto& run : ready) run();
  return joined;
}

void WorkerClocks::OnPushApplied(int worker, int64_t clock,
                                 int32_t batches_in_step) {
  std::vector<std::function<void()>> ready;
  {
    MutexLock lock(&mu_);
    if (clock < clocks_[worker]) return;  // A step already counted.
    std::map<int64_t, int32_t>& partial = partial_[worker];
    if (batches_in_step > 1) {
      int32_t& applied = partial[clock];
      if (++applied < batches_in_step) {
        if (partial.size() > kMaxPartialSteps) partial.erase(partial.begin());
        return;
      }
    }
    clocks_[worker] = clock + 1;
    partial.erase(partial.begin(), partial.upper_bound(clock));
    ready = ReleaseLocked();
  }
  for (auto& run : ready) run();
}

absl::Status WorkerClocks::Exclude(absl::Span<const int32_t> workers) {
  std::vector<std::function<void()>> ready;
  {
    MutexLock lock(&mu_);
    std::vector<bool> excluded(clocks_.size(), false);
    for (int32_t w : workers) {
      if (w < 0 || w >= static_cast<int>(clocks_.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("ExcludeWorkers names worker ", w, "; this job has ",
                         clocks_.size(), " workers"));
      }
      excluded[w] = true;
    }
    std::vector<int> returning;
    for (size_t i = 0; i < clocks_.size(); ++i) {
      if (excluded_[i] && !excluded[i]) returning.push_back(i);
    }
    excluded_ = std::move(excluded);
    for (int w : returning) CatchUpLocked(w);
    ready = ReleaseLocked();
  }
  for (auto& run : ready) run();
  return absl::OkStatus();
}

std::optional<uint64_t> WorkerClocks::WhenAllowed(int64_t clock,
                                                  std::function<void()> ready) {
  MutexLock lock(&mu_);
  if (AllowsLocked(clock)) return std::nullopt;
  const uint64_t id = next_id_++;
  waiters_.push_back(Waiter{id, clock - max_staleness_, std::move(ready)});
  return id;
}

bool WorkerClocks::AllowsLocked(int64_t clock) const {
  const std::optional<int64_t> slowest = SlowestLocked(-1);
  return !slowest.has_value() || *slowest >= clock - max_staleness_;
}

bool WorkerClocks::Allows(int64_t clock) const {
  MutexLock lock(&mu_);
  return AllowsLocked(clock);
}

bool WorkerClocks::Cancel(uint64_t id) {
  MutexLock lock(&mu_);
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [id](const Waiter& w) { return w.id == id; });
  if (it == waiters_.end()) return false;
  waiters_.erase(it);
  return true;
}

std::string WorkerClocks::DescribeWait(int worker, int64_t clock) const {
  MutexLock lock(&mu_);
  const int slowest = SlowestWorkerLocked();
  const std::string pull =
      absl::StrCat("this pull by worker ", worker, " is for its step ", clock,
                   " with max_staleness ", max_staleness_);
  if (slowest < 0) return absl::StrCat(pull, "; no worker bounds it now");
  return absl::StrCat("worker ", slowest, " is at step ", clocks_[slowest],
                      "; ", pull);
}

int64_t WorkerClocks::ClockOf(int worker) const {
  MutexLock lock(&mu_);
  return clocks_[worker];
}

int WorkerClocks::waiting() const {
  MutexLock lock(&mu_);
  return static_cast<int>(waiters_.size());
}

void WorkerClocks::CountWait(absl::Duration waited) {
  MutexLock lock(&mu_);
  ++waits_;
  waited_ += waited;
}

void WorkerClocks::AddTo(StatsResponse& stats) const {
  MutexLock lock(&mu_);
  for (size_t i = 0; i < clocks_.size(); ++i) {
    stats.add_worker_clocks(clocks_[i]);
    stats.add_worker_excluded(excluded_[i]);
  }
  stats.set_bounded_waits(waits_);
  stats.set_bounded_wait_seconds(absl::ToDoubleSeconds(waited_));
}

std::string DescribeBoundedWaits(const StatsResponse& stats) {
  if (stats.worker_clocks().empty()) return "";
  std::string clocks;
  for (int i = 0; i < stats.worker_clocks_size(); ++i) {
    absl::StrAppend(&clocks, i == 0 ? "" : ", ", stats.worker_clocks(i),
                    i < stats.worker_excluded_size() && stats.worker_excluded(i)
                        ? " (excluded)"
                        : "");
  }
  return absl::StrFormat(
      "bounded staleness: %d pulls waited for a slower worker, %.2f s in "
      "all; worker clocks %s",
      stats.bounded_waits(), stats.bounded_wait_seconds(), clocks);
}

}  // namespace psflow
