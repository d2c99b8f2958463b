// BackgroundQueue: one thread that runs the closures posted to it, one at
// a time, in the order posted. Post() answers a ticket; WaitFor(ticket)
// returns once that closure (and every one before it) has run, so what it
// wrote is visible to the waiter.
//
// Why: a worker's training thread used to start its own calls (numbering
// the next batch's ids, gathering rows, gRPC's send path with TLS run
// inline) between two steps; on a GPU host that was a quarter of a CTR
// step. Posted here, that work runs while the step computes, and the
// training thread waits only where it needs a result, on its ticket.
//
// The thread runs with flush-to-zero (common/float_mode.h), as every
// thread that does float math. Thread-safe. The destructor runs what is
// still queued and joins the thread.
#ifndef PSFLOW_COMMON_BACKGROUND_QUEUE_H_
#define PSFLOW_COMMON_BACKGROUND_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "absl/time/time.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace psflow {

class BackgroundQueue {
 public:
  // A ticket no closure has: WaitFor(kNothing) returns at once.
  static constexpr uint64_t kNothing = 0;

  // `clock` times busy(); it must outlive the queue.
  explicit BackgroundQueue(Clock* clock = &RealClock());
  ~BackgroundQueue();

  BackgroundQueue(const BackgroundQueue&) = delete;
  BackgroundQueue& operator=(const BackgroundQueue&) = delete;

  // Queues `work` and answers its ticket (> kNothing, increasing).
  uint64_t Post(std::function<void()> work);

  // Blocks until the closure of `ticket` has run (kNothing: returns).
  void WaitFor(uint64_t ticket);
  // Whether it has run (without blocking).
  bool Done(uint64_t ticket) const;

  // Blocks until everything posted so far has run.
  void Drain();

  // The time the thread spent running closures, in all.
  absl::Duration busy() const;

 private:
  void Loop();

  Clock* const clock_;
  mutable Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t posted_ ABSL_GUARDED_BY(mu_) = kNothing;
  uint64_t done_ ABSL_GUARDED_BY(mu_) = kNothing;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration busy_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_BACKGROUND_QUEUE_H_
