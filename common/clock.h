// The one source of time for the roles: what time it is, sleeping until a
// time, and waiting for a condition with a deadline.
//
// Production code takes a Clock (RealClock() unless a test passes another)
// instead of calling absl::Now() and absl::SleepFor() itself, so behaviour
// that depends on time (heartbeat and lease timeouts, recovery windows,
// retry loops) is tested in-process with a FakeClock, in milliseconds of
// real time, instead of whole processes waiting out real seconds.
// tools/check_clock.py keeps direct sleeps out of production code.
#ifndef PSFLOW_COMMON_CLOCK_H_
#define PSFLOW_COMMON_CLOCK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <set>

#include "absl/time/time.h"
#include "common/mutex.h"

namespace psflow {

class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() const = 0;

  // Returns once Now() >= deadline.
  virtual void SleepUntil(absl::Time deadline) = 0;
  void SleepFor(absl::Duration duration) { SleepUntil(Now() + duration); }

  // With `mu` held: releases it until `condition` holds or Now() reaches
  // `deadline`; returns whether `condition` holds.
  virtual bool AwaitWithDeadline(Mutex& mu, const Condition& condition,
                                 absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

// The system's clock (absl::Now); shared, never destroyed.
Clock& RealClock();

// A clock that moves only when told to (Advance, SetTime), for tests.
// Threads sleeping or waiting on it wake when it reaches their deadline.
// Thread-safe.
class FakeClock final : public Clock {
 public:
  // Starts at an arbitrary fixed time (not the Unix epoch, so code that
  // subtracts a duration from Now() stays in range).
  FakeClock();
  explicit FakeClock(absl::Time start);

  absl::Time Now() const override;
  void SleepUntil(absl::Time deadline) override;
  bool AwaitWithDeadline(Mutex& mu, const Condition& condition,
                         absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override;

  void Advance(absl::Duration duration);
  void SetTime(absl::Time time);

  // Simulated time: a thread that would wait on this clock (its condition
  // still false after a moment of real time) moves the clock to its
  // deadline instead. Code that only waits out timeouts then runs through
  // minutes of them at once, with the same order of events.
  void SetAutoAdvance(bool on) { auto_advance_ = on; }

  // How many threads are in SleepUntil or AwaitWithDeadline now: tests
  // advance the clock once the code under test waits on it.
  int waiters() const;
  // Blocks (real time) until at least `count` threads wait on this clock.
  void AwaitWaiters(int count) const;
  // Blocks (real time) until at least `count` threads wait on this clock
  // for a time still ahead: the ones an Advance woke have done what was
  // due and wait again.
  void AwaitSettled(int count) const;

 private:
  // Registers a waiter until the end of the scope.
  class Waiting;
  int CountLocked(bool only_ahead) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  std::atomic<int64_t> now_ns_;
  std::atomic<bool> auto_advance_{false};
  // Its unlock in Advance and SetTime wakes SleepUntil.
  mutable Mutex mu_;
  // The deadlines (Unix ns) of the threads waiting now.
  std::multiset<int64_t> deadlines_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_CLOCK_H_
