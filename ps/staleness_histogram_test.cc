#include "ps/staleness_histogram.h"

#include <limits>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;

TEST(StalenessHistogramTest, BucketsArePowersOfTwo) {
  EXPECT_EQ(StalenessHistogram::UpperBound(0), 0);
  EXPECT_EQ(StalenessHistogram::UpperBound(1), 1);
  EXPECT_EQ(StalenessHistogram::UpperBound(2), 3);
  EXPECT_EQ(StalenessHistogram::UpperBound(3), 7);
  EXPECT_EQ(StalenessHistogram::UpperBound(10), 1023);
  EXPECT_EQ(StalenessHistogram::UpperBound(11),
            std::numeric_limits<int64_t>::max());
}

TEST(StalenessHistogramTest, CountsEachValueInItsBucket) {
  StalenessHistogram histogram;
  for (int64_t s : {0, 0, 1, 2, 3, 4, 7, 8, 1023, 1024, 1 << 20}) {
    histogram.Record(s);
  }
  histogram.Record(-3);  // after a restore: counted as fresh
  StatsResponse stats;
  histogram.AddTo(stats);
  EXPECT_THAT(stats.staleness_counts(),
              ElementsAre(3, 1, 2, 2, 1, 0, 0, 0, 0, 0, 1, 2));
  EXPECT_EQ(stats.staleness_sum(),
            0 + 0 + 1 + 2 + 3 + 4 + 7 + 8 + 1023 + 1024 + (1 << 20));
  EXPECT_EQ(stats.staleness_upper_bounds_size(), StalenessHistogram::kBuckets);
}

TEST(StalenessHistogramTest, ConcurrentRecordsAreAllCounted) {
  StalenessHistogram histogram;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&histogram, t] {
      for (int i = 0; i < 10000; ++i) histogram.Record(t);
    });
  }
  for (std::thread& thread : threads) thread.join();
  StatsResponse stats;
  histogram.AddTo(stats);
  // Staleness 0, 1, and 2 and 3 (one bucket).
  EXPECT_THAT(stats.staleness_counts(),
              ElementsAre(10000, 10000, 20000, 0, 0, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(stats.staleness_sum(), 10000 * (0 + 1 + 2 + 3));
}

TEST(StalenessHistogramTest, DescribesTheDistribution) {
  StatsResponse none;
  StalenessHistogram().AddTo(none);
  EXPECT_EQ(DescribeStaleness(none), "no gradients applied");

  StalenessHistogram histogram;
  for (int i = 0; i < 90; ++i) histogram.Record(1);
  for (int i = 0; i < 9; ++i) histogram.Record(5);
  histogram.Record(2000);
  StatsResponse stats;
  histogram.AddTo(stats);
  EXPECT_EQ(DescribeStaleness(stats),
            "staleness of 100 applied gradients: mean 21.35, median <= 1, "
            "90% <= 1, 99% <= 7, max >= 1024");
}

}  // namespace
}  // namespace psflow
