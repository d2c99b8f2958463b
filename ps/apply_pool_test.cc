#include "ps/apply_pool.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/float_mode.h"
#include "common/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAreArray;

// A pool that splits any work into ranges as short as 64 floats unless
// told otherwise.
ApplyPool::Options Threads(int threads, int64_t min_parallel_work = 0,
                           int64_t min_range_floats = 64) {
  ApplyPool::Options options;
  options.threads = threads;
  options.min_parallel_work = min_parallel_work;
  options.min_range_floats = min_range_floats;
  return options;
}

// The ranges one ForEachRange call makes, in order.
std::vector<std::pair<int64_t, int64_t>> RangesOf(ApplyPool& pool, int64_t n) {
  Mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.ForEachRange(n, 1.0, [&](int64_t begin, int64_t end) {
    MutexLock lock(&mu);
    ranges.emplace_back(begin, end);
  });
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

TEST(ApplyPoolTest, RangesCoverTheFloatsOnceOnAlignedBoundaries) {
  ApplyPool pool(Threads(3));
  for (int64_t n : {1, 63, 64, 65, 1000, 4096, 100003, 1 << 20}) {
    SCOPED_TRACE(n);
    const auto ranges = RangesOf(pool, n);
    ASSERT_EQ(static_cast<int>(ranges.size()), pool.Ranges(n));
    int64_t next = 0;
    for (const auto& [begin, end] : ranges) {
      EXPECT_EQ(begin, next);
      EXPECT_LT(begin, end);
      EXPECT_EQ(begin % ApplyPool::kRangeAlignFloats, 0);
      next = end;
    }
    EXPECT_EQ(next, n);
  }
}

TEST(ApplyPoolTest, WorkBelowTheThresholdRunsInlineAsOneRange) {
  ApplyPool pool(Threads(4, /*min_parallel_work=*/1000));
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  pool.ForEachRange(999, 1.0, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 999);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_GT(pool.Ranges(1000), 1);
}

TEST(ApplyPoolTest, OneThreadNeverSplits) {
  ApplyPool pool(Threads(1));
  EXPECT_EQ(pool.Ranges(int64_t{1} << 30), 1);
}

TEST(ApplyPoolTest, CheaperWorkStaysInlineToMoreFloats) {
  ApplyPool pool(Threads(4, /*min_parallel_work=*/1000));
  EXPECT_EQ(pool.Ranges(1500, /*relative_cost=*/0.5), 1);
  EXPECT_GT(pool.Ranges(1500, /*relative_cost=*/1.0), 1);
  EXPECT_GT(pool.Ranges(500, /*relative_cost=*/5.0), 1);
}

TEST(ApplyPoolTest, NoRangeIsShorterThanTheMinimum) {
  ApplyPool::Options options;
  options.threads = 16;
  ApplyPool pool(options);
  const int64_t n = 4 * ApplyPool::kDefaultMinParallelWork + 5;
  const auto ranges = RangesOf(pool, n);
  EXPECT_GT(ranges.size(), 1u);
  for (const auto& [begin, end] : ranges) {
    EXPECT_GE(end - begin,
              ApplyPool::kDefaultMinRangeFloats - ApplyPool::kRangeAlignFloats);
  }
  EXPECT_EQ(pool.Ranges(ApplyPool::kDefaultMinParallelWork - 1), 1);
}

// Every range (and group) may run on a pool thread: the pool threads run
// with flush-to-zero whatever the mode of the thread that made the pool.
TEST(ApplyPoolTest, PoolThreadsFlushSubnormalsToZero) {
  DisableFlushToZero();
  ApplyPool pool(Threads(2));
  const std::thread::id caller = std::this_thread::get_id();
  Notification pool_thread_ran;
  std::atomic<int> pool_ranges{0};
  std::atomic<bool> all_flushed{true};
  pool.ForEachRange(1 << 16, 1.0, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() == caller) {
      // Leaves the other ranges to the pool thread until it has run one,
      // so the register is read there for certain.
      pool_thread_ran.WaitForNotificationWithTimeout(absl::Seconds(30));
      return;
    }
    // The control register itself (MXCSR on x86-64, FPCR on AArch64).
    if (!FlushToZeroEnabled()) all_flushed = false;
    ++pool_ranges;
    if (!pool_thread_ran.HasBeenNotified()) pool_thread_ran.Notify();
  });
  EXPECT_GE(pool_ranges.load(), 1);
  EXPECT_TRUE(all_flushed.load());
  // And the calling thread got the mode too, so its ranges compute alike.
  EXPECT_TRUE(FlushToZeroEnabled());
}

// With two threads, one running call already keeps a core busy with its
// calling thread: a second call at the same time runs all its ranges on
// its own thread.
TEST(ApplyPoolTest, ACallWhileTheCoresAreBusyRunsInline) {
  ApplyPool pool(Threads(2));
  const std::thread::id first_caller = std::this_thread::get_id();
  Notification second_done;
  std::atomic<bool> second_inline{true};
  std::atomic<int> second_ranges{0};
  std::thread second;
  pool.ForEachRange(1 << 16, 1.0, [&](int64_t begin, int64_t) {
    if (std::this_thread::get_id() != first_caller || begin != 0) return;
    second = std::thread([&] {
      const std::thread::id me = std::this_thread::get_id();
      pool.ForEachRange(1 << 16, 1.0, [&](int64_t, int64_t) {
        if (std::this_thread::get_id() != me) second_inline = false;
        ++second_ranges;
      });
      second_done.Notify();
    });
    second_done.WaitForNotificationWithTimeout(absl::Seconds(30));
  });
  second.join();
  EXPECT_TRUE(second_done.HasBeenNotified());
  EXPECT_EQ(second_ranges.load(), pool.Ranges(1 << 16));
  EXPECT_TRUE(second_inline.load());
}

TEST(ApplyPoolTest, GroupsKeepItemsInOrderAndBalanceTheirSizes) {
  ApplyPool pool(Threads(2, /*min_parallel_work=*/100));
  const std::vector<int64_t> sizes = {10, 10, 10, 10, 500, 10, 300, 200};
  Mutex mu;
  std::vector<std::pair<size_t, size_t>> groups;
  pool.ForEachGroup(sizes, [&](size_t begin, size_t end) {
    MutexLock lock(&mu);
    groups.emplace_back(begin, end);
  });
  std::sort(groups.begin(), groups.end());
  ASSERT_GT(groups.size(), 1u);
  size_t next = 0;
  for (const auto& [begin, end] : groups) {
    EXPECT_EQ(begin, next);
    EXPECT_LT(begin, end);
    next = end;
  }
  EXPECT_EQ(next, sizes.size());
}

TEST(ApplyPoolTest, SmallGroupsRunInlineAsOne) {
  ApplyPool pool(Threads(4, /*min_parallel_work=*/1000));
  int calls = 0;
  pool.ForEachGroup(std::vector<int64_t>{100, 200, 300},
                    [&](size_t begin, size_t end) {
                      ++calls;
                      EXPECT_EQ(begin, 0u);
                      EXPECT_EQ(end, 3u);
                    });
  EXPECT_EQ(calls, 1);
}

// Many threads at once, each with its own work and some of it nested (a
// batch's chunk applied by a pool thread splits its own floats): every
// float is written exactly once by its own call.
TEST(ApplyPoolTest, ConcurrentAndNestedCallsEachCoverTheirOwnWork) {
  ApplyPool pool(Threads(3, /*min_parallel_work=*/256));
  constexpr int kCallers = 8;
  constexpr int kRounds = 50;
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&pool, &wrong, t] {
      std::vector<int> hits(5000 + 777 * t);
      const std::vector<int64_t> halves = {
          static_cast<int64_t>(hits.size() / 2),
          static_cast<int64_t>(hits.size() - hits.size() / 2)};
      for (int round = 0; round < kRounds; ++round) {
        std::fill(hits.begin(), hits.end(), 0);
        pool.ForEachGroup(halves, [&](size_t begin, size_t end) {
          for (size_t half = begin; half < end; ++half) {
            const int64_t offset = half == 0 ? 0 : halves[0];
            pool.ForEachRange(halves[half], 1.0, [&](int64_t b, int64_t e) {
              for (int64_t i = b; i < e; ++i) ++hits[offset + i];
            });
          }
        });
        if (std::any_of(hits.begin(), hits.end(),
                        [](int h) { return h != 1; })) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ApplyPoolTest, HostCoresIsAtLeastOne) {
  EXPECT_GE(ApplyPool::HostCores(), 1);
}

}  // namespace
}  // namespace psflow
