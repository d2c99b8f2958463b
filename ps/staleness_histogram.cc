#include "ps/staleness_histogram.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psflow {

void StalenessHistogram::Record(int64_t staleness) {
  staleness = std::max<int64_t>(staleness, 0);
  int bucket = 0;
  while (bucket < kBuckets - 1 && staleness > UpperBound(bucket)) ++bucket;
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(staleness, std::memory_order_relaxed);
}

int64_t StalenessHistogram::UpperBound(int bucket) {
  if (bucket >= kBuckets - 1) return std::numeric_limits<int64_t>::max();
  return bucket == 0 ? 0 : (int64_t{1} << bucket) - 1;
}

void StalenessHistogram::AddTo(StatsResponse& stats) const {
  stats.clear_staleness_upper_bounds();
  stats.clear_staleness_counts();
  for (int b = 0; b < kBuckets; ++b) {
    stats.add_staleness_upper_bounds(UpperBound(b));
    stats.add_staleness_counts(counts_[b].load(std::memory_order_relaxed));
  }
  stats.set_staleness_sum(sum_.load(std::memory_order_relaxed));
}

namespace {

// The upper bound of the bucket that holds the `fraction` quantile.
std::string Quantile(const StatsResponse& stats, int64_t total,
                     double fraction) {
  int64_t seen = 0;
  const int buckets = std::min(stats.staleness_counts_size(),
                               stats.staleness_upper_bounds_size());
  for (int b = 0; b < buckets; ++b) {
    seen += stats.staleness_counts(b);
    if (seen >= fraction * total) {
      const int64_t bound = stats.staleness_upper_bounds(b);
      if (bound == std::numeric_limits<int64_t>::max()) {
        return absl::StrCat(">= ", stats.staleness_upper_bounds(b - 1) + 1);
      }
      return absl::StrCat("<= ", bound);
    }
  }
  return "?";
}

}  // namespace

std::string DescribeStaleness(const StatsResponse& stats) {
  int64_t total = 0;
  for (int64_t count : stats.staleness_counts()) total += count;
  if (total == 0) return "no gradients applied";
  return absl::StrFormat(
      "staleness of %d applied gradients: mean %.2f, median %s, 90%% %s, "
      "99%% %s, max %s",
      total, static_cast<double>(stats.staleness_sum()) / total,
      Quantile(stats, total, 0.5), Quantile(stats, total, 0.9),
      Quantile(stats, total, 0.99), Quantile(stats, total, 1.0));
}

}  // namespace psflow
