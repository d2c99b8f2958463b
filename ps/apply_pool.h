// The parameter server's apply threads: a fixed pool that spreads one
// push's optimizer apply over the server's cores, either by splitting a
// chunk's floats into contiguous ranges (ForEachRange) or by handing the
// independent chunks of a batch to different threads (ForEachGroup).
//
// Results never depend on the thread count. The optimizers are element-wise
// and a range runs the same vectorized loop over its floats as the whole
// chunk would, so no float's operations are reordered or regrouped; inner
// range boundaries fall on multiples of kRangeAlignFloats, so inner ranges
// hold whole vectors and the loop's scalar tail covers the same floats as
// the unsplit loop's (and the scalar and vector forms compute the same IEEE
// operations anyway: ps/parallel_apply_test checks the bits). Every range
// runs with flush-to-zero (common/float_mode.h): the pool's threads set it
// when they start and each call sets it on the calling thread, so a range
// computes the same whichever thread claims it.
//
// Small work stays on the calling thread: below min_parallel_work waking a
// pool thread (50-70 us on a VM) costs more than it saves (measured in
// bench/RESULTS.md, "A server that keeps up").
//
// Thread safety: any number of threads may call ForEachRange/ForEachGroup at
// once, including from inside a range or group (every gRPC and
// shared-memory thread that serves a push does). Their jobs queue first
// come, first served, and a caller works on its own job's ranges as well,
// so a call finishes even when every pool thread is busy elsewhere; it only
// waits for ranges that another thread has already started. While as many
// calls as the pool has threads are running (their calling threads keep
// the cores busy), a new call runs its ranges on its own thread, in order:
// concurrent pushes then spread over the cores by themselves, as they did
// before the pool, and a lone large push gets every core. So a range or
// group may take locks and make nested calls, but never wait for a lock
// its own caller holds (a batch's chunks are locked inside the groups, not
// around the call).
#ifndef PSFLOW_PS_APPLY_POOL_H_
#define PSFLOW_PS_APPLY_POOL_H_

#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/mutex.h"

namespace psflow {

class ApplyPool {
 public:
  // Range boundaries are multiples of this many floats (256 bytes): a
  // whole number of vectors and cache lines, so the split keeps each
  // float's code path and no two threads write one cache line.
  static constexpr int64_t kRangeAlignFloats = 64;
  // See Options::min_range_floats.
  static constexpr int64_t kDefaultMinRangeFloats = 8192;
  // Ranges per thread: more than one, so a thread that finishes early (or
  // starts late: waking a pool thread takes 50-70 us on a VM) takes over
  // the unstarted ranges of the others.
  static constexpr int kRangesPerThread = 4;
  // See Options::min_parallel_work; measured in bench/optimizer_bench.
  static constexpr int64_t kDefaultMinParallelWork = 256 * 1024;

  struct Options {
    // Threads one apply is spread over: the calling thread and
    // threads - 1 pool threads. 1: no pool threads, everything inline.
    int threads = 1;
    // Work smaller than this runs inline on the calling thread. Work is
    // counted in floats at Adam's cost per float: n floats of an optimizer
    // whose Optimizer::relative_cost() is c are n * c (SGD's floats count
    // half, FTRL's five times).
    int64_t min_parallel_work = kDefaultMinParallelWork;
    // No range is shorter (unless the work is): claiming one takes a lock,
    // well under 1% of the apply of 8192 floats. At least
    // kRangeAlignFloats.
    int64_t min_range_floats = kDefaultMinRangeFloats;
  };

  // The cores this process may use (common/host_cores.h: its CPU
  // affinity, lowered to its container's CPU quota), at least 1.
  static int HostCores();

  explicit ApplyPool(Options options);
  // Stops and joins the pool threads; no call may be running.
  ~ApplyPool();

  ApplyPool(const ApplyPool&) = delete;
  ApplyPool& operator=(const ApplyPool&) = delete;

  int threads() const { return threads_; }

  // How many ranges ForEachRange splits n floats of the given cost into
  // (1: inline).
  int Ranges(int64_t n, double relative_cost = 1.0) const;

  // Calls fn(begin, end) for contiguous ranges that cover [0, n) exactly
  // once, on this thread and the pool's, and returns when every call has
  // returned. `relative_cost` is the work per float (see
  // Options::min_parallel_work). Ranges must not write to the same memory.
  void ForEachRange(int64_t n, double relative_cost,
                    absl::FunctionRef<void(int64_t, int64_t)> fn);

  // For independent items of the given work (a batch's chunks: floats
  // times relative cost): calls fn(begin, end) for contiguous groups of
  // items [begin, end) that cover them all, each group on one thread, and
  // returns when every call has returned. Groups are balanced by work; one
  // group (inline) when it adds up to less than min_parallel_work.
  void ForEachGroup(absl::Span<const int64_t> work,
                    absl::FunctionRef<void(size_t, size_t)> fn);

 private:
  // One call's work: `tasks` numbered tasks, claimed in order.
  struct Job {
    absl::FunctionRef<void(int)>* task = nullptr;
    int tasks = 0;
    int claimed = 0;   // guarded by mu_
    int finished = 0;  // guarded by mu_
  };

  // How many parts `units` of something worth `work` split into.
  int Parts(int64_t units, double work) const;
  // The start of range `i` of `ranges` over n floats.
  static int64_t Boundary(int64_t n, int ranges, int i);
  // Runs task(0..tasks-1) on this thread and the pool's.
  void Run(int tasks, absl::FunctionRef<void(int)> task);
  // Claims `job`'s next task (one is left), dropping the job from the
  // queue when it was the last.
  int ClaimLocked(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PoolThreadLoop();

  // Constant after construction.
  const int threads_;
  const int64_t min_parallel_work_;
  const int64_t min_range_floats_;
  std::vector<std::thread> pool_threads_;

  Mutex mu_;
  // Jobs with unclaimed tasks, oldest first.
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);
  // Calls in Run (each keeps its calling thread busy).
  int running_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psflow

#endif  // PSFLOW_PS_APPLY_POOL_H_
