#include "chief/termination.h"

#include <signal.h>

#include <cstdlib>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/signals.h"

namespace psflow {
namespace {

int SignalNumber(const std::string& signal) {
  return TerminationSignalNumber(signal);
}

ChiefTermination::Options WithSaveBound(absl::Duration save_bound) {
  ChiefTermination::Options options;
  options.save_bound = save_bound;
  return options;
}

}  // namespace

ChiefTermination::ChiefTermination(absl::Duration save_bound)
    : ChiefTermination(WithSaveBound(save_bound)) {}

ChiefTermination::ChiefTermination(Options options)
    : options_([&options] {
        if (!options.exit) options.exit = [](int code) { std::_Exit(code); };
        return std::move(options);
      }()) {}

ChiefTermination::~ChiefTermination() { gone_->Notify(); }

void ChiefTermination::ExitAfter(absl::Duration bound, int code,
                                 std::string why) {
  std::thread([gone = gone_, exit = options_.exit, bound, code,
               why = std::move(why)] {
    if (gone->WaitForNotificationWithTimeout(bound)) return;
    LOG(ERROR) << why;
    exit(code);
  }).detach();
}

void ChiefTermination::OnSignal(const std::string& signal) {
  const int code = 128 + SignalNumber(signal);
  StopHandler stop;
  {
    MutexLock lock(&mu_);
    if (requested_.has_value() || (!training_ && !stop_handler_)) {
      LOG(ERROR) << "received " << signal << "; exiting"
                 << (!requested_.has_value() ? ""
                     : stop_began_ ? " without waiting for the job's stop "
                                     "under way"
                                   : " without waiting for the checkpoint "
                                     "under way");
      options_.exit(code);
      return;
    }
    requested_ = signal;
    if (!training_) {
      stop_began_ = true;
      handler_running_ = true;
      stop = stop_handler_;
    }
  }
  if (stop == nullptr) {
    LOG(WARNING) << "received " << signal
                 << "; saving a checkpoint of the current step before the "
                    "job stops (at most "
                 << absl::FormatDuration(options_.save_bound)
                 << ", chief --preemption_save_timeout_s; a second signal "
                    "exits at once)";
    ExitAfter(options_.save_bound, code,
              absl::StrCat("the checkpoint before stopping did not finish "
                           "within ",
                           absl::FormatDuration(options_.save_bound),
                           " (chief --preemption_save_timeout_s); exiting "
                           "without it"));
    return;
  }
  LOG(WARNING) << "received " << signal
               << " outside training (nothing to save that the parameter "
                  "servers do not hold): failing the job, telling the "
                  "parameter servers to stop and releasing the checkpoint "
                  "directory before exiting (at most "
               << absl::FormatDuration(options_.stop_bound)
               << "; a second signal exits at once)";
  ExitAfter(options_.stop_bound, code,
            absl::StrCat("the job's stop did not finish within ",
                         absl::FormatDuration(options_.stop_bound),
                         "; exiting without it"));
  // Not on the signal thread: a second signal must still reach OnSignal.
  // Once handler_running_ is false the process may be exiting and this
  // object gone (main's statics): the thread uses only its own copies.
  std::thread([this, stop = std::move(stop), exit = options_.exit, signal,
               code] {
    stop(signal);
    {
      MutexLock lock(&mu_);
      handler_running_ = false;
    }
    LOG(WARNING) << "the job is stopped (" << signal << "); exiting";
    exit(code);
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

bool ChiefTermination::LeaveTrainingToWait() {
  MutexLock lock(&mu_);
  if (!training_ || requested_.has_value()) return false;
  training_ = false;
  return true;
}

bool ChiefTermination::SetTraining(bool training) {
  MutexLock lock(&mu_);
  // A stop outside training was asked for: training must not begin now.
  if (training && requested_.has_value() && !training_) return false;
  training_ = training;
  return true;
}

void ChiefTermination::SetStopHandler(StopHandler handler) {
  MutexLock lock(&mu_);
  // What a running handler uses stays until it returned.
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !handler_running_;
  };
  mu_.Await(Condition(&idle));
  stop_handler_ = std::move(handler);
}

}  // namespace psflow
