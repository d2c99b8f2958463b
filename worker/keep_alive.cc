#include "worker/keep_alive.h"

#include <algorithm>
#include <utility>

#include "common/logging.h"

namespace psflow {

KeepAlive::KeepAlive(CoordinatorClient* coordinator, ProgressReport first,
                     absl::Duration interval, Clock* clock)
    : coordinator_(coordinator),
      interval_(std::max(interval, absl::Milliseconds(100))),
      clock_(clock),
      latest_(std::move(first)) {
  thread_ = std::thread([this] { Loop(); });
}

KeepAlive::~KeepAlive() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void KeepAlive::Remember(const ProgressReport& report) {
  MutexLock lock(&mu_);
  latest_ = report;
  // The resends are answered at once: a held one would keep this thread
  // (and so the worker's exit) waiting for the chief's news.
  latest_.clear_wait_for_news_ms();
  sent_ = clock_->Now();
}

ProgressReport KeepAlive::latest() const {
  MutexLock lock(&mu_);
  return latest_;
}

void KeepAlive::OnJobEnd(std::function<void()> action) {
  MutexLock lock(&action_mu_);
  on_job_end_ = std::move(action);
}

std::optional<StatusResponse> KeepAlive::JobEnded() const {
  MutexLock lock(&mu_);
  return ended_;
}

void KeepAlive::Loop() {
  // The first report goes out at once: registration already counts as
  // contact, but a report also tells the chief what the worker is doing.
  absl::Time next = clock_->Now();
  while (true) {
    ProgressReport report;
    {
      MutexLock lock(&mu_);
      if (clock_->AwaitWithDeadline(mu_, Condition(&stopping_), next)) return;
      const absl::Time now = clock_->Now();
      if (now - sent_ < interval_) {  // someone else reported meanwhile
        next = sent_ + interval_;
        continue;
      }
      report = latest_;
      sent_ = now;
      next = now + interval_;
    }
    // Whoever acts on the chief's answers sends its own reports; the only
    // answer acted on here is the job's end.
    absl::StatusOr<StatusResponse> answer =
        coordinator_->ReportProgress(report, absl::Seconds(5));
    if (!answer.ok() ||
        (answer->state() != SUCCEEDED && answer->state() != FAILED)) {
      continue;
    }
    {
      MutexLock lock(&mu_);
      if (!ended_.has_value()) {
        LOG(INFO) << "the chief says the job "
                  << (answer->state() == SUCCEEDED ? "succeeded" : "failed")
                  << "; cancelling calls to the parameter servers";
      }
      ended_ = *answer;
    }
    MutexLock lock(&action_mu_);
    if (on_job_end_) on_job_end_();
  }
}

ProgressReport PreparingReport(int worker_index, uint64_t incarnation) {
  ProgressReport report;
  report.set_worker_index(worker_index);
  report.set_incarnation(incarnation);
  report.set_preparing(true);
  return report;
}

}  // namespace psflow
