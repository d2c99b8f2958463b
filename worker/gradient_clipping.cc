#include "worker/gradient_clipping.h"

#include <algorithm>
#include <cmath>

namespace psflow {
namespace {

// Scales `values` by `scale`.
void Scale(absl::Span<float> values, double scale) {
  const float s = static_cast<float>(scale);
  for (float& v : values) v *= s;
}

}  // namespace

double SumOfSquares(absl::Span<const float> values) {
  // Four partial sums: independent chains the compiler can vectorize.
  double sums[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= values.size(); i += 4) {
    for (int k = 0; k < 4; ++k) {
      const double v = values[i + k];
      sums[k] += v * v;
    }
  }
  for (; i < values.size(); ++i) {
    const double v = values[i];
    sums[0] += v * v;
  }
  return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

GradientClipper::GradientClipper(const GradientClipping& config)
    : enabled_(config.has_clip_norm() || config.has_clip_value() ||
               config.has_global_clip_norm()),
      clip_norm_(config.has_clip_norm() ? config.clip_norm() : 0),
      clip_value_(config.has_clip_value() ? config.clip_value() : 0),
      global_clip_norm_(
          config.has_global_clip_norm() ? config.global_clip_norm() : 0) {}

bool GradientClipper::ClipOne(absl::Span<float> gradient) const {
  if (clip_value_ <= 0 && clip_norm_ <= 0) return false;
  const double squares = SumOfSquares(gradient);
  if (!std::isfinite(squares)) return false;  // left for the servers to refuse
  bool changed = false;
  if (clip_value_ > 0) {
    const float bound = static_cast<float>(clip_value_);
    for (float& v : gradient) {
      const float clipped = std::clamp(v, -bound, bound);
      changed |= clipped != v;
      v = clipped;
    }
  }
  if (clip_norm_ > 0) {
    const double norm = std::sqrt(changed ? SumOfSquares(gradient) : squares);
    if (norm > clip_norm_) {
      Scale(gradient, clip_norm_ / norm);
      changed = true;
    }
  }
  return changed;
}

void GradientClipper::ClipRest(const std::vector<absl::Span<float>>& dense,
                               const std::vector<bool>& clipped,
                               const std::vector<absl::Span<float>>& rows) {
  if (!enabled_) return;
  for (size_t v = 0; v < dense.size(); ++v) {
    if (v < clipped.size() && clipped[v]) continue;
    step_clipped_ |= ClipOne(dense[v]);
  }
  for (const absl::Span<float>& r : rows) step_clipped_ |= ClipOne(r);
  if (global_clip_norm_ > 0) {
    double squares = 0;
    for (const absl::Span<float>& d : dense) squares += SumOfSquares(d);
    for (const absl::Span<float>& r : rows) squares += SumOfSquares(r);
    const double norm = std::sqrt(squares);
    if (std::isfinite(norm) && norm > global_clip_norm_) {
      const double scale = global_clip_norm_ / norm;
      for (const absl::Span<float>& d : dense) Scale(d, scale);
      for (const absl::Span<float>& r : rows) Scale(r, scale);
      step_clipped_ = true;
    }
  }
  if (step_clipped_) ++clipped_steps_;
  step_clipped_ = false;
}

}  // namespace psflow
