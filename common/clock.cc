#include "common/clock.h"

#include <algorithm>
#include <thread>

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
                         absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
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

FakeClock::FakeClock()
    : FakeClock(absl::FromUnixSeconds(1'800'000'000)) {}  // in 2027

FakeClock::FakeClock(absl::Time start) : now_ns_(absl::ToUnixNanos(start)) {}

absl::Time FakeClock::Now() const {
  return absl::FromUnixNanos(now_ns_.load());
}

void FakeClock::SleepUntil(absl::Time deadline) {
  ++waiters_;
  const int64_t until = absl::ToUnixNanos(deadline);
  const auto reached = [this, until] { return now_ns_.load() >= until; };
  {
    MutexLock lock(&mu_);
    if (auto_advance_ && !reached()) {
      now_ns_ = std::max(now_ns_.load(), until);
    }
    // Advance and SetTime take mu_: their unlock wakes this wait.
    mu_.Await(Condition(&reached));
  }
  --waiters_;
}

bool FakeClock::AwaitWithDeadline(Mutex& mu, const Condition& condition,
                                  absl::Time deadline) {
  ++waiters_;
  bool holds = condition.Eval();
  while (!holds && Now() < deadline) {
    holds = mu.AwaitWithTimeout(condition, kFakePoll);
    if (!holds && auto_advance_) {
      MutexLock lock(&mu_);
      now_ns_ = std::max(now_ns_.load(), absl::ToUnixNanos(deadline));
    }
  }
  --waiters_;
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

void FakeClock::AwaitWaiters(int count) const {
  while (waiters_.load() < count) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace psflow
