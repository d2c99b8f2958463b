#include "common/background_queue.h"

#include <atomic>
#include <thread>
#include <vector>

#include "common/float_mode.h"
#include "common/mutex.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(BackgroundQueueTest, RunsInTheOrderPostedOnAnotherThread) {
  BackgroundQueue queue;
  std::vector<int> order;  // written by the queue's thread only
  std::thread::id ran_on;
  uint64_t last = BackgroundQueue::kNothing;
  for (int i = 0; i < 100; ++i) {
    last = queue.Post([&order, &ran_on, i] {
      order.push_back(i);
      ran_on = std::this_thread::get_id();
    });
  }
  queue.WaitFor(last);  // what the closures wrote is visible now
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(BackgroundQueueTest, WaitForReturnsOnceItsClosureRanNotLater) {
  BackgroundQueue queue;
  Notification release;
  const uint64_t first = queue.Post([] {});
  const uint64_t blocked =
      queue.Post([&release] { release.WaitForNotification(); });
  queue.WaitFor(first);
  EXPECT_TRUE(queue.Done(first));
  EXPECT_FALSE(queue.Done(blocked));  // held until released
  release.Notify();
  queue.WaitFor(blocked);
  EXPECT_TRUE(queue.Done(blocked));
  queue.WaitFor(BackgroundQueue::kNothing);  // returns at once
}

TEST(BackgroundQueueTest, DrainWaitsForEverythingPosted) {
  BackgroundQueue queue;
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) queue.Post([&ran] { ++ran; });
  queue.Drain();
  EXPECT_EQ(ran.load(), 50);
}

TEST(BackgroundQueueTest, TheDestructorRunsWhatIsStillQueued) {
  std::atomic<int> ran{0};
  {
    BackgroundQueue queue;
    for (int i = 0; i < 50; ++i) queue.Post([&ran] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 50);
}

TEST(BackgroundQueueTest, ItsThreadFlushesSubnormalsToZero) {
  DisableFlushToZero();  // not inherited from this thread, set by the queue
  BackgroundQueue queue;
  bool flushes = false;
  queue.WaitFor(queue.Post([&flushes] { flushes = FlushToZeroEnabled(); }));
#if defined(__x86_64__) || defined(__aarch64__)
  EXPECT_TRUE(flushes);
#endif
  EnableFlushToZero();
}

}  // namespace
}  // namespace psflow
