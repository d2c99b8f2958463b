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
    : state_(std::make_shared<State>([&options] {
        if (!options.exit) options.exit = [](int code) { std::_Exit(code); };
        return std::move(options);
      }())) {}

ChiefTermination::~ChiefTermination() { state_->gone.Notify(); }

void ChiefTermination::ExitAfter(const std::shared_ptr<State>& state,
                                 absl::Duration bound, int code,
                                 std::string why) {
  std::thread([state, bound, code, why = std::move(why)] {
    if (state->gone.WaitForNotificationWithTimeout(bound)) return;
    LOG(ERROR) << why;
    state->options.exit(code);
  }).detach();
}

void ChiefTermination::RunStop(const std::shared_ptr<State>& state,
                               StopHandler stop, const std::string& signal,
                               int code) {
  const absl::Duration bound = state->options.stop_bound;
  ExitAfter(state, bound, code,
            absl::StrCat("the job's stop did not finish within ",
                         absl::FormatDuration(bound), "; exiting without it"));
  // Not on the signal thread: a second signal must still reach OnSignal.
  std::thread([state, stop = std::move(stop), signal, code] {
    stop(signal);
    {
      MutexLock lock(&state->mu);
      state->handler_running = false;
    }
    LOG(WARNING) << "the job is stopped (" << signal << "); exiting";
    state->options.exit(code);
  }).detach();
}

void ChiefTermination::GiveUpTheSaveAfter(const std::shared_ptr<State>& state,
                                          const std::string& signal, int code) {
  std::thread([state, signal, code] {
    const absl::Duration bound = state->options.save_bound;
    if (state->gone.WaitForNotificationWithTimeout(bound)) return;
    StopHandler stop;
    bool training;
    {
      MutexLock lock(&state->mu);
      // Still training: the supervisor is still in its save. Otherwise it
      // returned and the chief is ending the job, past its bound too.
      training = state->training;
      if (training && state->stop_handler && !state->stop_began) {
        state->stop_began = true;
        state->handler_running = true;
        stop = state->stop_handler;
      }
    }
    if (stop == nullptr) {
      LOG(ERROR) << (training ? "the checkpoint before stopping"
                              : "the job's stop after its checkpoint")
                 << " did not finish within " << absl::FormatDuration(bound)
                 << " (chief --preemption_save_timeout_s); exiting without it";
      state->options.exit(code);
      return;
    }
    LOG(ERROR) << "the checkpoint before stopping did not finish within "
               << absl::FormatDuration(bound)
               << " (chief --preemption_save_timeout_s): failing the job "
                  "without it and telling the parameter servers to stop "
                  "(at most "
               << absl::FormatDuration(state->options.stop_bound)
               << "); a restart resumes from the newest checkpoint";
    RunStop(state, std::move(stop), signal, code);
  }).detach();
}

void ChiefTermination::OnSignal(const std::string& signal) {
  const int code = 128 + SignalNumber(signal);
  State& state = *state_;
  StopHandler stop;
  {
    MutexLock lock(&state.mu);
    if (state.requested.has_value() ||
        (!state.training && !state.stop_handler)) {
      LOG(ERROR) << "received " << signal << "; exiting"
                 << (!state.requested.has_value() ? ""
                     : state.stop_began ? " without waiting for the job's "
                                          "stop under way"
                                        : " without waiting for the "
                                          "checkpoint under way");
      state.options.exit(code);
      return;
    }
    state.requested = signal;
    if (!state.training) {
      state.stop_began = true;
      state.handler_running = true;
      stop = state.stop_handler;
    }
  }
  if (stop == nullptr) {
    LOG(WARNING) << "received " << signal
                 << "; saving a checkpoint of the current step before the "
                    "job stops (at most "
                 << absl::FormatDuration(state.options.save_bound)
                 << ", chief --preemption_save_timeout_s; a second signal "
                    "exits at once)";
    GiveUpTheSaveAfter(state_, signal, code);
    return;
  }
  LOG(WARNING) << "received " << signal
               << " outside training (nothing to save that the parameter "
                  "servers do not hold): failing the job, telling the "
                  "parameter servers to stop and releasing the checkpoint "
                  "directory before exiting (at most "
               << absl::FormatDuration(state.options.stop_bound)
               << "; a second signal exits at once)";
  RunStop(state_, std::move(stop), signal, code);
}

std::optional<std::string> ChiefTermination::requested() const {
  MutexLock lock(&state_->mu);
  return state_->requested;
}

int ChiefTermination::ExitCode(int otherwise) const {
  MutexLock lock(&state_->mu);
  return state_->requested.has_value() ? 128 + SignalNumber(*state_->requested)
                                       : otherwise;
}

bool ChiefTermination::LeaveTrainingToWait() {
  MutexLock lock(&state_->mu);
  if (!state_->training || state_->requested.has_value()) return false;
  state_->training = false;
  return true;
}

bool ChiefTermination::SetTraining(bool training) {
  MutexLock lock(&state_->mu);
  // A stop outside training was asked for: training must not begin now.
  if (training && state_->requested.has_value() && !state_->training) {
    return false;
  }
  state_->training = training;
  return true;
}

void ChiefTermination::SetStopHandler(StopHandler handler) {
  State& state = *state_;
  MutexLock lock(&state.mu);
  // What a running handler uses stays until it returned.
  auto idle = [&state]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
    return !state.handler_running;
  };
  state.mu.Await(Condition(&idle));
  state.stop_handler = std::move(handler);
}

}  // namespace psflow
