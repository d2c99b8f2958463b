#include "chief/server_watch.h"

namespace psflow {

ServerWatch::ServerWatch(ParameterClient* client, ServerBoard* board,
                         absl::Duration interval)
    : client_(client),
      board_(board),
      interval_(interval),
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
    last_poll_ = absl::Now();
  }
  std::vector<absl::StatusOr<StatsResponse>> stats =
      client_->StatsOfEach(absl::Seconds(2));
  board_->RecordStats(stats, absl::Now());
  return stats;
}

void ServerWatch::Run() {
  while (true) {
    {
      MutexLock lock(&mu_);
      // Wakes at once when stopped; otherwise when the next round is due
      // (a Poll() in between moves it later).
      if (mu_.AwaitWithDeadline(Condition(&stop_), last_poll_ + interval_)) {
        return;
      }
      if (absl::Now() < last_poll_ + interval_) continue;
    }
    (void)Poll();
  }
}

}  // namespace psflow
