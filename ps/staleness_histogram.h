// How stale the gradients a server applies are: for each accepted
// gradient, the updates its chunk had received since the version the
// gradient was computed from (the version the pushing worker pulled).
// Async training applies gradients of any staleness; sync training only
// fresh ones (0). Power-of-two buckets: 0, 1, 2-3, 4-7, ..., 512-1023,
// then 1024 and more.
//
// Lock-free; Record is safe from any thread.
#ifndef PSFLOW_PS_STALENESS_HISTOGRAM_H_
#define PSFLOW_PS_STALENESS_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "proto/ps.pb.h"

namespace psflow {

class StalenessHistogram {
 public:
  static constexpr int kBuckets = 12;

  // Counts one gradient; a negative staleness (a gradient computed from a
  // version the chunk no longer has, after a restore) counts as 0.
  void Record(int64_t staleness);

  // The inclusive upper bound of bucket `bucket` (the last: INT64_MAX).
  static int64_t UpperBound(int bucket);

  // Writes the bounds, counts and sum into `stats`.
  void AddTo(StatsResponse& stats) const;

 private:
  std::array<std::atomic<int64_t>, kBuckets> counts_{};
  std::atomic<int64_t> sum_{0};
};

// "staleness of 1200 applied gradients: mean 1.4, median <= 1, 90% <= 3,
// 99% <= 7, max <= 15" from the histogram in `stats` (summed over servers
// by the caller if needed); "no gradients applied" when there are none.
std::string DescribeStaleness(const StatsResponse& stats);

}  // namespace psflow

#endif  // PSFLOW_PS_STALENESS_HISTOGRAM_H_
