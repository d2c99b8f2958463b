#include "worker/prefetch_policy.h"

namespace psflow {
namespace {

// Weight of the newest fresh step in the moving averages.
constexpr double kNewest = 0.25;

}  // namespace

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
  if (fresh_steps_ == 0) {
    compute_s_ = c;
    wait_s_ = w;
  } else if (prefetching_) {
    // A probe stands alone: the averages are from before the switch.
    compute_s_ = c;
    wait_s_ = w;
  } else {
    compute_s_ += kNewest * (c - compute_s_);
    wait_s_ += kNewest * (w - wait_s_);
  }
  ++fresh_steps_;
  if (choice_ != Choice::kAuto || fresh_steps_ < kMeasureSteps) return;
  const double share = wait_share();
  if (!prefetching_ && share > kPrefetchAbove) {
    prefetching_ = true;
    since_probe_ = 0;
  } else if (prefetching_ && share < kFreshBelow) {
    prefetching_ = false;
  }
}

double PrefetchPolicy::wait_share() const {
  if (fresh_steps_ == 0) return -1;
  return compute_s_ > 0 ? wait_s_ / compute_s_ : (wait_s_ > 0 ? 1e9 : 0);
}

}  // namespace psflow
