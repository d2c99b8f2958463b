#include "ps/termination_grace.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace psflow {

TerminationGrace::~TerminationGrace() {
  MutexLock lock(&mu_);
  stopped_ = true;
  mu_.Await(Condition(
      +[](bool* running) { return !*running; }, &timer_running_));
}

void TerminationGrace::OnSignal(const std::string& signal, absl::Duration grace,
                                bool in_use) {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    const bool first = signals_++ == 0;
    if (first && in_use && grace > absl::ZeroDuration()) {
      LOG(WARNING) << "received " << signal << "; serving up to "
                   << absl::FormatDuration(grace)
                   << " more so the chief can save a checkpoint first "
                      "(--termination_grace_s; the chief's shutdown ends it "
                      "sooner, a second signal at once)";
      on_grace_();
      timer_running_ = true;
      std::thread([this, signal, grace] {
        const absl::Time until = clock_->Now() + grace;
        MutexLock lock(&mu_);
        clock_->AwaitWithDeadline(mu_, Condition(&stopped_), until);
        const bool stop_now = !stopped_;
        timer_running_ = false;
        if (stop_now) {
          request_shutdown_(absl::StrCat(
              "received ", signal, " ", absl::FormatDuration(grace),
              " ago and the chief did not stop this server"));
        }
      }).detach();
      return;
    }
  }
  Shutdown(absl::StrCat("received ", signal));
}

void TerminationGrace::Stopped() {
  MutexLock lock(&mu_);
  stopped_ = true;
}

void TerminationGrace::Shutdown(const std::string& reason) {
  MutexLock lock(&mu_);
  if (!stopped_) request_shutdown_(reason);
}

}  // namespace psflow
