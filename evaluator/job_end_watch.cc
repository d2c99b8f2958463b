#include "evaluator/job_end_watch.h"

#include "common/logging.h"

namespace psflow {

JobEndWatch::JobEndWatch(CoordinatorClient* coordinator,
                         ParameterClient* client, absl::Duration interval,
                         absl::Duration silence, Clock* clock)
    : coordinator_(coordinator),
      client_(client),
      interval_(interval),
      silence_(silence),
      clock_(clock),
      thread_([this] { Watch(); }) {}

JobEndWatch::~JobEndWatch() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

std::optional<StatusResponse> JobEndWatch::JobEnded() const {
  MutexLock lock(&mu_);
  return ended_;
}

void JobEndWatch::Watch() {
  absl::Time last_contact = clock_->Now();
  while (true) {
    {
      MutexLock lock(&mu_);
      if (clock_->AwaitWithDeadline(mu_, Condition(&stopping_),
                                    clock_->Now() + interval_)) {
        return;
      }
    }
    absl::StatusOr<StatusResponse> status = coordinator_->GetStatus(interval_);
    bool cancel = false;
    if (status.ok()) {
      last_contact = clock_->Now();
      cancel = status->state() == SUCCEEDED || status->state() == FAILED;
      if (cancel) {
        MutexLock lock(&mu_);
        ended_ = *status;
      }
    } else {
      cancel = clock_->Now() - last_contact >= silence_;
    }
    servers_silent_ =
        cancel && !status.ok() && !client_->AnyServerAnswers(interval_);
    if (cancel) {
      // Every interval while it lasts: calls started since are cancelled
      // too.
      if (cancellations_.fetch_add(1) == 0) {
        LOG(INFO) << (status.ok() ? "the job ended" : "the chief is silent")
                  << "; cancelling the evaluation's calls to the parameter "
                     "servers";
      }
      // An ended job's servers may be gone: later calls end at once too.
      // A silent chief may come back, so only the calls in flight end.
      if (status.ok()) {
        client_->Close();
      } else {
        client_->CancelInFlight();
      }
    }
  }
}

}  // namespace psflow
