// BOUNDED mode's bound on one parameter server (stale synchronous
// parallel, as in Ho et al., NIPS 2013, and the OSDI'14 parameter server):
// every worker's clock (the steps it has pushed here) and the pulls
// waiting for the slowest one.
//
// A worker's pull for its step c may be answered once every live worker's
// clock is at least c - max_staleness: its gradients for steps before that
// are applied here. With max_staleness 0 that is sync without aggregation;
// with a large one, async. "Live" is every worker the chief has not
// excluded (lost, finished, or never joined; ExcludeWorkers). A worker
// that joins or returns to the bound starts no further behind than the
// slowest live one, so it never holds back the others.
//
// A step's gradient may reach this server in several PushBatch calls
// (large variables travel a chunk per call): the clock advances when all
// of them are applied, so a pull released by it sees the whole step.
//
// Thread-safe. Waiters' callbacks run outside the lock, on the thread
// whose push or exclusion released them.
#ifndef PSFLOW_PS_WORKER_CLOCKS_H_
#define PSFLOW_PS_WORKER_CLOCKS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "proto/ps.pb.h"

namespace psflow {

class WorkerClocks {
 public:
  // Steps are counted in int64 but a clock from the wire above this is
  // refused, so clock - max_staleness and clock + 1 never overflow.
  static constexpr int64_t kMaxClock = int64_t{1} << 52;
  // A step's gradient reaches a server in at most this many calls.
  static constexpr int32_t kMaxBatchesInStep = 1 << 20;

  // `num_workers` >= 1, `max_staleness` >= 0 (checked by Configure).
  WorkerClocks(int num_workers, int64_t max_staleness);

  // InvalidArgument unless `worker` is one of the job's and `clock` is in
  // [0, kMaxClock].
  absl::Status Check(int worker, int64_t clock) const;

  // A worker (re)joins: its clock becomes the largest of the recorded one,
  // `clock` and the slowest other live worker's; it is live again. Returns
  // that clock. `worker` and `clock` must pass Check.
  int64_t Join(int worker, int64_t clock);

  // One of `batches_in_step` calls carrying `worker`'s gradient for step
  // `clock` was applied, or refused for its values (1: the step came in one
  // call).
  // Must pass Check.
  void OnPushApplied(int worker, int64_t clock, int32_t batches_in_step);

  // Replaces the set of workers that do not bound the others.
  // InvalidArgument for an index outside the job (nothing changes). A
  // worker leaving the set starts no further behind than the slowest live
  // worker.
  absl::Status Exclude(absl::Span<const int32_t> workers);

  // Runs `ready` once a pull for step `clock` is allowed (the bound is the
  // same for every worker): now
  // (returns nullopt without running it) or later (returns an id for
  // Cancel). Must pass Check.
  std::optional<uint64_t> WhenAllowed(int64_t clock,
                                      std::function<void()> ready);

  // Whether a pull for step `clock` may be answered now.
  bool Allows(int64_t clock) const;

  // Forgets a waiter; false when it already ran or is running.
  bool Cancel(uint64_t id);

  // Why `worker`'s pull for step `clock` waits: "worker 2 is at step 10;
  // this pull by worker 0 is for step 21 with max_staleness 8".
  std::string DescribeWait(int worker, int64_t clock) const;

  // `worker`'s clock (must pass Check).
  int64_t ClockOf(int worker) const;

  // How many pulls wait for the bound now.
  int waiting() const;

  // Counts a pull that waited `waited`.
  void CountWait(absl::Duration waited);

  // Writes clocks, exclusions and wait counters into `stats`.
  void AddTo(StatsResponse& stats) const;

 private:
  struct Waiter {
    uint64_t id;
    int64_t needed;  // the slowest live clock that releases it
    std::function<void()> ready;
  };
  // The slowest live clock, ignoring `except` (-1: none); nullopt when no
  // worker is live.
  std::optional<int64_t> SlowestLocked(int except) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool AllowsLocked(int64_t clock) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The slowest live worker's index (-1 when none is live).
  int SlowestWorkerLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Raises `worker`'s clock to the slowest other live one.
  void CatchUpLocked(int worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the waiters the bound now allows; the caller runs them after
  // unlocking.
  std::vector<std::function<void()>> ReleaseLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_staleness_;

  mutable Mutex mu_;
  std::vector<int64_t> clocks_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> excluded_ ABSL_GUARDED_BY(mu_);
  // Per worker: calls applied so far for steps not complete here yet.
  std::vector<std::map<int64_t, int32_t>> partial_ ABSL_GUARDED_BY(mu_);
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t waits_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration waited_ ABSL_GUARDED_BY(mu_);
};

// "bounded staleness: 12 pulls waited for a slower worker, 3.20 s in all;
// worker clocks 200, 201, 67 (excluded)" from `stats`; empty when the
// server is not in BOUNDED mode.
std::string DescribeBoundedWaits(const StatsResponse& stats);

}  // namespace psflow

#endif  // PSFLOW_PS_WORKER_CLOCKS_H_
