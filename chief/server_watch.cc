#include "chief/server_watch.h"

namespace psflow {

ServerWatch::ServerWatch(ParameterClient* client, ServerBoard* board,
                         absl::Duration interval, Clock* clock)
    : client_(client),
      board_(board),
      interval_(interval),
      clock_(clock),
      thread_([this] { Run(); }) {}

ServerWatch::~ServerWatch() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

std::vector<absl::StatusOr<StatsResponse>> ServerWatch::Poll() {
  {
    MutexLock lock(&mu_);
    last_poll_ = clock_->Now();
  }
  std::vector<absl::StatusOr<StatsResponse>> stats =
      client_->StatsOfEach(absl::Seconds(2));
  board_->RecordStats(stats, clock_->Now());
  return stats;
}

void ServerWatch::Run() {
  while (true) {
    {
      MutexLock lock(&mu_);
      // Wakes at once when stopped; otherwise when the next round is due
      // (a Poll() in between moves it later).
      if (clock_->AwaitWithDeadline(mu_, Condition(&stop_),
                                    last_poll_ + interval_)) {
        return;
      }
      if (clock_->Now() < last_poll_ + interval_) continue;
    }
    (void)Poll();
  }
}

}  // namespace psflow
