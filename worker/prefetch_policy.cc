#include "worker/prefetch_policy.h"

#include <algorithm>

namespace psflow {

bool PrefetchPolicy::PrefetchThisStep() {
  switch (choice_) {
    case Choice::kAlways:
      return true;
    case Choice::kNever:
      return false;
    case Choice::kAuto:
      break;
  }
  if (!prefetching_) return false;
  if (++since_probe_ > kProbeEvery) {
    since_probe_ = 0;
    return false;  // a fresh probe: has the wire become cheap?
  }
  return true;
}

void PrefetchPolicy::ObserveFreshStep(absl::Duration compute,
                                      absl::Duration wait) {
  const double c = absl::ToDoubleSeconds(compute);
  const double w = absl::ToDoubleSeconds(wait);
  const double share = c > 0 ? w / c : (w > 0 ? 1e9 : 0);
  if (choice_ != Choice::kAuto) {
    wait_share_ = share;
    return;
  }
  if (prefetching_) {
    // Back to fresh pulls only when each of the latest probes found the
    // wire cheap (each also waited for the other push in flight, so they
    // err towards prefetching).
    wait_share_ = share;
    probes_.push_back(share);
    if (static_cast<int>(probes_.size()) > kProbesToDecide) {
      probes_.erase(probes_.begin());
    }
    if (static_cast<int>(probes_.size()) == kProbesToDecide &&
        *std::max_element(probes_.begin(), probes_.end()) < kFreshBelow) {
      prefetching_ = false;
      probes_.clear();
    }
    return;
  }
  shares_.push_back(share);
  if (static_cast<int>(shares_.size()) < kMeasureSteps) {
    if (wait_share_ < 0) wait_share_ = share;
    return;
  }
  std::nth_element(shares_.begin(), shares_.begin() + shares_.size() / 2,
                   shares_.end());
  wait_share_ = shares_[shares_.size() / 2];
  shares_.clear();
  if (wait_share_ > kPrefetchAbove) {
    prefetching_ = true;
    since_probe_ = 0;
    probes_.clear();
  }
}

}  // namespace psflow
