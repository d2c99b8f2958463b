#include "common/clock.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace psflow {
namespace {

class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepUntil(absl::Time deadline) override {
    const absl::Duration left = deadline - absl::Now();
    if (left > absl::ZeroDuration()) absl::SleepFor(left);
  }
  bool AwaitWithDeadline(Mutex& mu, const Condition& condition,
                         absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override {
    return mu.AwaitWithDeadline(condition, deadline);
  }
};

// How often a FakeClock waiter looks at the fake time again: the waited-on
// mutex is not the clock's, so Advance cannot wake it directly.
constexpr absl::Duration kFakePoll = absl::Milliseconds(1);

}  // namespace

Clock& RealClock() {
  static Clock* const clock = new SystemClock();
  return *clock;
}

class FakeClock::Waiting {
 public:
  Waiting(FakeClock& clock, int64_t deadline) : clock_(clock) {
    MutexLock lock(&clock_.mu_);
    at_ = clock_.deadlines_.insert(deadline);
  }
  ~Waiting() {
    MutexLock lock(&clock_.mu_);
    clock_.deadlines_.erase(at_);
  }

 private:
  FakeClock& clock_;
  std::multiset<int64_t>::iterator at_;
};

FakeClock::FakeClock()
    : FakeClock(absl::FromUnixSeconds(1'800'000'000)) {}  // in 2027

FakeClock::FakeClock(absl::Time start) : now_ns_(absl::ToUnixNanos(start)) {}

absl::Time FakeClock::Now() const {
  return absl::FromUnixNanos(now_ns_.load());
}

void FakeClock::SleepUntil(absl::Time deadline) {
  const int64_t until = absl::ToUnixNanos(deadline);
  Waiting waiting(*this, until);
  const auto reached = [this, until] { return now_ns_.load() >= until; };
  MutexLock lock(&mu_);
  if (auto_advance_ && !reached()) now_ns_ = until;
  mu_.Await(Condition(&reached));
}

bool FakeClock::AwaitWithDeadline(Mutex& mu, const Condition& condition,
                                  absl::Time deadline) {
  const int64_t until = absl::ToUnixNanos(deadline);
  Waiting waiting(*this, until);
  bool holds = condition.Eval();
  while (!holds && now_ns_.load() < until) {
    holds = mu.AwaitWithTimeout(condition, kFakePoll);
    if (!holds && auto_advance_) {
      MutexLock lock(&mu_);
      now_ns_ = std::max(now_ns_.load(), until);
    }
  }
  return holds;
}

void FakeClock::Advance(absl::Duration duration) {
  MutexLock lock(&mu_);
  now_ns_ += absl::ToInt64Nanoseconds(duration);
}

void FakeClock::SetTime(absl::Time time) {
  MutexLock lock(&mu_);
  now_ns_ = absl::ToUnixNanos(time);
}

int FakeClock::CountLocked(bool only_ahead) const {
  if (!only_ahead) return static_cast<int>(deadlines_.size());
  const int64_t now = now_ns_.load();
  return static_cast<int>(
      std::distance(deadlines_.upper_bound(now), deadlines_.end()));
}

int FakeClock::waiters() const {
  MutexLock lock(&mu_);
  return CountLocked(false);
}

void FakeClock::AwaitWaiters(int count) const {
  MutexLock lock(&mu_);
  const auto enough = [this, count]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return CountLocked(false) >= count;
  };
  mu_.Await(Condition(&enough));
}

void FakeClock::AwaitSettled(int count) const {
  MutexLock lock(&mu_);
  const auto settled = [this, count]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return CountLocked(true) >= count;
  };
  mu_.Await(Condition(&settled));
}

}  // namespace psflow
