#include "model/device/cpu/cpu_thread_pool.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "common/float_mode.h"
#include "gtest/gtest.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace psflow::cpu {
namespace {

TEST(CpuThreadPoolTest, ChunksCoverTheRangeOnceInOrder) {
  CpuThreadPool pool(3);
  ASSERT_EQ(pool.Chunks(100, 1), 3);
  std::vector<int64_t> begins(3, -1), ends(3, -1);
  std::vector<std::atomic<int>> visits(100);
  pool.ParallelFor(100, 1, [&](int chunk, int64_t begin, int64_t end) {
    begins[chunk] = begin;
    ends[chunk] = end;
    for (int64_t i = begin; i < end; ++i) ++visits[i];
  });
  EXPECT_EQ(begins, (std::vector<int64_t>{0, 33, 66}));
  EXPECT_EQ(ends, (std::vector<int64_t>{33, 66, 100}));
  for (const auto& v : visits) EXPECT_EQ(v.load(), 1);
}

TEST(CpuThreadPoolTest, NoChunkIsSmallerThanTheGrain) {
  CpuThreadPool pool(4);
  EXPECT_EQ(pool.Chunks(10, 100), 1);
  EXPECT_EQ(pool.Chunks(250, 100), 2);
  EXPECT_EQ(pool.Chunks(1000, 100), 4);
  EXPECT_EQ(pool.Chunks(0, 100), 1);
  int calls = 0;
  pool.ParallelFor(0, 1, [&](int, int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0) << "an empty range runs nothing";
}

// Makes each of `threads` chunks wait until all have started, so that each
// runs on a thread of its own (the caller cannot claim a second chunk while
// it waits in its first). Fails rather than hangs if they never meet.
class Meeting {
 public:
  explicit Meeting(int threads) : threads_(threads) {}
  void Arrive() {
    ++arrived_;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (arrived_.load() < threads_) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "only " << arrived_.load() << " of " << threads_
                      << " chunks started together";
        return;
      }
      std::this_thread::yield();
    }
  }

 private:
  const int threads_;
  std::atomic<int> arrived_{0};
};

TEST(CpuThreadPoolTest, ChunksRunOnTheHelperThreads) {
  CpuThreadPool pool(3);
  std::vector<std::thread::id> ran(3);
  Meeting meeting(3);
  pool.ParallelFor(3, 1, [&](int chunk, int64_t, int64_t) {
    ran[chunk] = std::this_thread::get_id();
    meeting.Arrive();
  });
  EXPECT_EQ(ran[0], std::this_thread::get_id()) << "the caller takes chunk 0";
  EXPECT_NE(ran[1], std::this_thread::get_id());
  EXPECT_NE(ran[2], std::this_thread::get_id());
  EXPECT_NE(ran[1], ran[2]);
}

TEST(CpuThreadPoolTest, HelperThreadsFlushSubnormalsEvenIfTheCreatorDoesNot) {
  DisableFlushToZero();  // not inherited from here, then
  CpuThreadPool pool(3);
  std::vector<unsigned> csr(3, 0);
  std::vector<std::thread::id> ran(3);
  Meeting meeting(3);
  pool.ParallelFor(3, 1, [&](int chunk, int64_t, int64_t) {
    ran[chunk] = std::this_thread::get_id();
    meeting.Arrive();
#if defined(__x86_64__) || defined(__i386__)
    csr[chunk] = _mm_getcsr();
#endif
  });
  EnableFlushToZero();
#if defined(__x86_64__) || defined(__i386__)
  constexpr unsigned kFlushToZero = 1u << 15, kDenormalsAreZero = 1u << 6;
  for (int chunk = 1; chunk < 3; ++chunk) {
    ASSERT_NE(ran[chunk], std::this_thread::get_id());
    EXPECT_EQ(csr[chunk] & kFlushToZero, kFlushToZero) << "chunk " << chunk;
    EXPECT_EQ(csr[chunk] & kDenormalsAreZero, kDenormalsAreZero)
        << "chunk " << chunk;
  }
  EXPECT_EQ(csr[0] & kFlushToZero, 0u) << "the caller's own mode is kept";
#else
  GTEST_SKIP() << "MXCSR is x86's";
#endif
}

TEST(CpuThreadPoolTest, NestedCallsRunInlineInChunkOrder) {
  CpuThreadPool pool(2);
  std::vector<std::vector<int>> order(2);
  pool.ParallelFor(2, 1, [&](int outer, int64_t, int64_t) {
    pool.ParallelFor(4, 1, [&](int inner, int64_t, int64_t) {
      order[outer].push_back(inner);
    });
  });
  // The helpers are taken by the outer call: each inner call runs its
  // chunks on its own thread, one after the other.
  for (const auto& chunks : order) EXPECT_EQ(chunks, (std::vector<int>{0, 1}));
}

TEST(CpuThreadPoolTest, CallsFromSeveralThreadsAllComplete) {
  CpuThreadPool pool(2);
  std::vector<std::thread> callers;
  std::vector<int64_t> sums(4, 0);
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        std::vector<int64_t> parts(2, 0);
        pool.ParallelFor(1000, 1, [&](int chunk, int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) parts[chunk] += i;
        });
        sums[t] += parts[0] + parts[1];
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  for (int64_t sum : sums) EXPECT_EQ(sum, 200 * 999 * 1000 / 2);
}

}  // namespace
}  // namespace psflow::cpu
