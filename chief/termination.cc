#include "chief/termination.h"

#include <signal.h>

#include <cstdlib>
#include <thread>

#include "common/logging.h"

namespace psflow {
namespace {

int SignalNumber(const std::string& signal) {
  return signal == "SIGINT" ? SIGINT : SIGTERM;
}

}  // namespace

void ChiefTermination::OnSignal(const std::string& signal) {
  MutexLock lock(&mu_);
  if (requested_.has_value() || !training_) {
    LOG(ERROR) << "received " << signal << "; exiting"
               << (requested_.has_value()
                       ? " without waiting for the checkpoint under way"
                       : "");
    std::_Exit(128 + SignalNumber(signal));
  }
  requested_ = signal;
  LOG(WARNING) << "received " << signal
               << "; saving a checkpoint of the current step before the job "
                  "stops (at most "
               << absl::FormatDuration(save_bound_)
               << ", chief --preemption_save_timeout_s; a second signal "
                  "exits at once)";
  const absl::Duration bound = save_bound_;
  std::thread([signal, bound] {
    Notification never;
    never.WaitForNotificationWithTimeout(bound);
    LOG(ERROR) << "the checkpoint before stopping did not finish within "
               << absl::FormatDuration(bound)
               << " (chief --preemption_save_timeout_s); exiting without it";
    std::_Exit(128 + SignalNumber(signal));
  }).detach();
}

std::optional<std::string> ChiefTermination::requested() const {
  MutexLock lock(&mu_);
  return requested_;
}

int ChiefTermination::ExitCode(int otherwise) const {
  MutexLock lock(&mu_);
  return requested_.has_value() ? 128 + SignalNumber(*requested_) : otherwise;
}

void ChiefTermination::SetTraining(bool training) {
  MutexLock lock(&mu_);
  training_ = training;
}

}  // namespace psflow
