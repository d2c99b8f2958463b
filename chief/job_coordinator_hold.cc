// JobCoordinator's long polls (job_coordinator.h): which calls may wait,
// the in-process waits, and the holder that answers the calls a server
// handed over.
#include <algorithm>
#include <utility>

#include "chief/job_coordinator.h"

namespace psflow {

std::optional<JobCoordinator::Known> JobCoordinator::ProgressKnownLocked(
    const ProgressReport& report) const {
  // Only a finished worker waits for news; an error or a pause is news to
  // the chief, answered at once.
  const int index = report.worker_index();
  if (report.wait_for_news_ms() <= 0 || !report.finished() ||
      !report.error().empty() || report.paused() || index < 0 ||
      index >= static_cast<int>(workers_.size())) {
    return std::nullopt;
  }
  const Known known{index, TRAINING, report.generation()};
  if (NewsLocked(known)) return std::nullopt;
  return known;
}

std::optional<JobCoordinator::Known> JobCoordinator::StatusKnownLocked(
    const StatusRequest& request) const {
  if (request.wait_for_change_ms() <= 0 || request.task_type() != "evaluator" ||
      EndedLocked()) {
    return std::nullopt;
  }
  const Known known{kEvaluatorSlot, request.known_state(),
                    request.known_generation()};
  if (NewsLocked(known)) return std::nullopt;
  return known;
}

absl::Time JobCoordinator::HoldUntil(int64_t wait_ms) const {
  return options_.clock->Now() +
         std::min(absl::Milliseconds(wait_ms), kMaxHold);
}

bool JobCoordinator::NewsLocked(const Known& known) const {
  if (generation_ != known.generation) return true;
  // A finished worker waits the same way while the others train and while
  // the chief evaluates: only the end, a pause or a restore is news.
  auto seen_as = [&known](JobState state) {
    return known.slot != kEvaluatorSlot && state == FINAL_EVALUATION ? TRAINING
                                                                     : state;
  };
  return seen_as(state_) != seen_as(known.state);
}

void JobCoordinator::AnsweredLocked(const Known& known) {
  if (!EndedLocked()) return;
  if (known.slot == kEvaluatorSlot) {
    evaluator_heard_outcome_ = true;
  } else {
    workers_[known.slot].heard_outcome = true;
  }
}

void JobCoordinator::WaitForNewsLocked(const Known& known, absl::Time until) {
  auto news = [this, &known]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return NewsLocked(known);
  };
  options_.clock->AwaitWithDeadline(mu_, Condition(&news), until);
  AnsweredLocked(known);
}

JobCoordinator::Answer JobCoordinator::HoldLocked(const Known& known,
                                                  absl::Time until,
                                                  Answer answer) {
  if (!holding_) return answer;
  // A second call of the same task: the first was given up (its deadline
  // passed, or the task restarted), and the calls held stay bounded by
  // the job's tasks, whatever the network sends.
  Answer replaced;
  if (auto it = held_.find(known.slot); it != held_.end()) {
    replaced = std::move(it->second.answer);
  }
  held_[known.slot] = HeldCall{known, until, std::move(answer)};
  ++holds_made_;
  return replaced;
}

void JobCoordinator::ProgressOrHold(const ProgressReport& report,
                                    Answer answer) {
  StatusResponse status;
  {
    MutexLock lock(&mu_);
    ProgressLocked(report);
    if (std::optional<Known> known = ProgressKnownLocked(report)) {
      answer = HoldLocked(*known, HoldUntil(report.wait_for_news_ms()),
                          std::move(answer));
    }
    status = StatusLocked();
  }
  if (answer) answer(status);
}

void JobCoordinator::StatusOrHold(const StatusRequest& request, Answer answer) {
  StatusResponse status;
  {
    MutexLock lock(&mu_);
    StatusRequestLocked(request);
    if (std::optional<Known> known = StatusKnownLocked(request)) {
      answer = HoldLocked(*known, HoldUntil(request.wait_for_change_ms()),
                          std::move(answer));
    }
    status = StatusLocked();
  }
  if (answer) answer(status);
}

std::vector<JobCoordinator::Answer> JobCoordinator::TakeDueLocked(bool all) {
  std::vector<Answer> due;
  // All: the clock is not asked (a test's clock may be gone by the time
  // the coordinator is).
  const absl::Time now = all ? absl::InfiniteFuture() : options_.clock->Now();
  for (auto it = held_.begin(); it != held_.end();) {
    if (now >= it->second.until || NewsLocked(it->second.known)) {
      AnsweredLocked(it->second.known);
      due.push_back(std::move(it->second.answer));
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  return due;
}

void JobCoordinator::AnswerHeldCalls() {
  mu_.Lock();
  while (holding_) {
    if (std::vector<Answer> due = TakeDueLocked(/*all=*/false); !due.empty()) {
      // Answered outside the lock: an answer finishes an RPC.
      const StatusResponse status = StatusLocked();
      mu_.Unlock();
      for (Answer& answer : due) answer(status);
      mu_.Lock();
      continue;
    }
    if (held_.empty()) {
      // Nothing to time: wait for a call to hold, not on the clock (a
      // simulated clock would be moved for nothing).
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !holding_ || !held_.empty();
      };
      mu_.Await(Condition(&wake));
      continue;
    }
    absl::Time first = absl::InfiniteFuture();
    for (const auto& [slot, call] : held_) first = std::min(first, call.until);
    // Evaluated on every release of mu_, so every change of the state
    // (whoever makes it) wakes the holder, as it wakes the chief's waits.
    const uint64_t made = holds_made_;
    auto wake = [this, made]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (!holding_ || holds_made_ != made) return true;
      for (const auto& [slot, call] : held_) {
        if (NewsLocked(call.known)) return true;
      }
      return false;
    };
    options_.clock->AwaitWithDeadline(mu_, Condition(&wake), first);
  }
  mu_.Unlock();
}

void JobCoordinator::StartHolding() {
  MutexLock serialized(&holder_mu_);
  if (holder_.joinable()) return;
  {
    MutexLock lock(&mu_);
    holding_ = true;
  }
  holder_ = std::thread([this] { AnswerHeldCalls(); });
}

void JobCoordinator::StopHolding() {
  MutexLock serialized(&holder_mu_);
  {
    MutexLock lock(&mu_);
    holding_ = false;  // from now on nothing is held
  }
  // The holder finishes the answers it took, and returns.
  if (holder_.joinable()) holder_.join();
  std::vector<Answer> due;
  StatusResponse status;
  std::deque<RestoreRequest> refused;
  absl::Status why;
  {
    MutexLock lock(&mu_);
    due = TakeDueLocked(/*all=*/true);
    status = StatusLocked();
    // Restore requests are held calls too: no loop answers them now.
    stopped_ = true;
    refused = TakeRefusedRestoresLocked(&why);
  }
  for (Answer& answer : due) answer(status);
  Refuse(std::move(refused), why);
}

int JobCoordinator::HeldCalls() const {
  MutexLock lock(&mu_);
  return static_cast<int>(held_.size());
}

}  // namespace psflow
