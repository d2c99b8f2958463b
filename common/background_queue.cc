#include "common/background_queue.h"

#include <utility>

#include "common/float_mode.h"

namespace psflow {

BackgroundQueue::BackgroundQueue(Clock* clock)
    : clock_(clock), thread_([this] { Loop(); }) {}

BackgroundQueue::~BackgroundQueue() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

uint64_t BackgroundQueue::Post(std::function<void()> work) {
  MutexLock lock(&mu_);
  queue_.push_back(std::move(work));
  return ++posted_;
}

void BackgroundQueue::WaitFor(uint64_t ticket) {
  MutexLock lock(&mu_);
  auto ran = [this, ticket]()
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ >= ticket; };
  mu_.Await(Condition(&ran));
}

bool BackgroundQueue::Done(uint64_t ticket) const {
  MutexLock lock(&mu_);
  return done_ >= ticket;
}

void BackgroundQueue::Drain() {
  uint64_t last;
  {
    MutexLock lock(&mu_);
    last = posted_;
  }
  WaitFor(last);
}

absl::Duration BackgroundQueue::busy() const {
  MutexLock lock(&mu_);
  return busy_;
}

void BackgroundQueue::Loop() {
  EnableFlushToZero();
  while (true) {
    std::function<void()> work;
    {
      MutexLock lock(&mu_);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_;
      };
      mu_.Await(Condition(&has_work));
      // Stopping, what is queued still runs: a posted call is never lost.
      if (queue_.empty()) return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    const absl::Time start = clock_->Now();
    work();
    const absl::Duration took = clock_->Now() - start;
    MutexLock lock(&mu_);
    ++done_;
    busy_ += took;
  }
}

}  // namespace psflow
