#include "worker/keep_alive.h"

#include <algorithm>
#include <utility>

namespace psflow {

KeepAlive::KeepAlive(CoordinatorClient* coordinator, ProgressReport first,
                     absl::Duration interval)
    : coordinator_(coordinator),
      interval_(std::max(interval, absl::Milliseconds(100))),
      latest_(std::move(first)) {
  thread_ = std::thread([this] { Loop(); });
}

KeepAlive::~KeepAlive() {
  stop_.Notify();
  thread_.join();
}

void KeepAlive::Remember(const ProgressReport& report) {
  MutexLock lock(&mu_);
  latest_ = report;
  sent_ = absl::Now();
}

ProgressReport KeepAlive::latest() const {
  MutexLock lock(&mu_);
  return latest_;
}

void KeepAlive::Loop() {
  // The first report goes out at once: registration already counts as
  // contact, but a report also tells the chief what the worker is doing.
  absl::Duration wait = absl::ZeroDuration();
  while (!stop_.WaitForNotificationWithTimeout(wait)) {
    ProgressReport report;
    {
      MutexLock lock(&mu_);
      const absl::Duration since = absl::Now() - sent_;
      if (since < interval_) {
        wait = interval_ - since;
        continue;
      }
      report = latest_;
      sent_ = absl::Now();
    }
    wait = interval_;
    // Only liveness matters here: whoever acts on the chief's answers
    // sends its own reports.
    (void)coordinator_->ReportProgress(report, absl::Seconds(5));
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
