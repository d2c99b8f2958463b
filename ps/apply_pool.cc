#include "ps/apply_pool.h"

#include <algorithm>

#include "common/float_mode.h"
#include "common/host_cores.h"

namespace psflow {

int ApplyPool::HostCores() { return UsableCores(); }

ApplyPool::ApplyPool(Options options)
    : threads_(std::max(1, options.threads)),
      min_parallel_work_(std::max<int64_t>(0, options.min_parallel_work)),
      min_range_floats_(
          std::max<int64_t>(kRangeAlignFloats, options.min_range_floats)) {
  pool_threads_.reserve(threads_ - 1);
  for (int i = 1; i < threads_; ++i) {
    pool_threads_.emplace_back([this] { PoolThreadLoop(); });
  }
}

ApplyPool::~ApplyPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& thread : pool_threads_) thread.join();
}

int ApplyPool::Parts(int64_t units, double work) const {
  if (threads_ == 1 || work < static_cast<double>(min_parallel_work_)) {
    return 1;
  }
  return static_cast<int>(std::clamp<int64_t>(
      units / min_range_floats_, 1, int64_t{threads_} * kRangesPerThread));
}

int ApplyPool::Ranges(int64_t n, double relative_cost) const {
  return Parts(n, static_cast<double>(n) * relative_cost);
}

int64_t ApplyPool::Boundary(int64_t n, int ranges, int i) {
  if (i >= ranges) return n;
  // Each range is at least min_range_floats >= kRangeAlignFloats long (see
  // Parts), so the rounded boundaries still increase strictly.
  return n * i / ranges / kRangeAlignFloats * kRangeAlignFloats;
}

void ApplyPool::ForEachRange(int64_t n, double relative_cost,
                             absl::FunctionRef<void(int64_t, int64_t)> fn) {
  EnableFlushToZero();
  if (n <= 0) return;
  const int ranges = Ranges(n, relative_cost);
  if (ranges == 1) {
    fn(0, n);
    return;
  }
  Run(ranges, [n, ranges, &fn](int i) {
    fn(Boundary(n, ranges, i), Boundary(n, ranges, i + 1));
  });
}

void ApplyPool::ForEachGroup(absl::Span<const int64_t> work,
                             absl::FunctionRef<void(size_t, size_t)> fn) {
  EnableFlushToZero();
  if (work.empty()) return;
  int64_t total = 0;
  for (int64_t w : work) total += w;
  // As many groups as the work would make ranges, and never more than
  // the items.
  const int ranges = std::min<int>(Parts(total, static_cast<double>(total)),
                                   static_cast<int>(work.size()));
  // Item j joins the group the middle of its work falls in; groups stay in
  // item order, and an item never spans two.
  std::vector<size_t> starts = {0};
  int64_t begin = 0;
  int64_t group = 0;
  for (size_t j = 0; j < work.size(); ++j) {
    const int64_t middle = begin + work[j] / 2;
    const int64_t g =
        std::min<int64_t>(ranges - 1, total > 0 ? middle * ranges / total : 0);
    if (g != group) {
      if (j > 0) starts.push_back(j);
      group = g;
    }
    begin += work[j];
  }
  starts.push_back(work.size());
  const int groups = static_cast<int>(starts.size()) - 1;
  if (groups == 1) {
    fn(0, work.size());
    return;
  }
  Run(groups, [&starts, &fn](int i) { fn(starts[i], starts[i + 1]); });
}

int ApplyPool::ClaimLocked(Job& job) {
  const int task = job.claimed++;
  if (job.claimed == job.tasks) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), &job));
  }
  return task;
}

void ApplyPool::Run(int tasks, absl::FunctionRef<void(int)> task) {
  Job job;
  job.task = &task;
  job.tasks = tasks;
  auto finished = [&job]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return job.finished == job.tasks;
  };
  mu_.Lock();
  if (running_calls_ + 1 >= threads_) {
    // The other calls' threads keep the cores busy already: sharing this
    // job would only add switching between them. The same tasks, here,
    // in order.
    ++running_calls_;
    mu_.Unlock();
    for (int i = 0; i < tasks; ++i) task(i);
    mu_.Lock();
    --running_calls_;
    mu_.Unlock();
    return;
  }
  ++running_calls_;
  queue_.push_back(&job);
  // This thread works on its own job until every task is claimed, by it or
  // by a pool thread, then waits for the ones others started.
  while (job.claimed < job.tasks) {
    const int mine = ClaimLocked(job);
    mu_.Unlock();
    task(mine);
    mu_.Lock();
    ++job.finished;
  }
  mu_.Await(Condition(&finished));
  --running_calls_;
  mu_.Unlock();
}

void ApplyPool::PoolThreadLoop() {
  // Set here rather than inherited: the pool may be created by a thread
  // that never set the mode (a test, an in-process server).
  EnableFlushToZero();
  auto work_or_stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || !queue_.empty();
  };
  mu_.Lock();
  while (true) {
    mu_.Await(Condition(&work_or_stop));
    if (queue_.empty()) break;  // stopping, and nothing is left
    Job& job = *queue_.front();
    const int task = ClaimLocked(job);
    mu_.Unlock();
    (*job.task)(task);
    mu_.Lock();
    ++job.finished;
  }
  mu_.Unlock();
}

}  // namespace psflow
