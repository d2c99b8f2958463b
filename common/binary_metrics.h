// Metrics of a binary classifier (click-through-rate models): the exact
// area under the ROC curve and the mean log loss, and an accumulator that
// collects a held-out set batch by batch and scores it at the end.
//
// Scores are any real numbers whose order ranks the examples (logits or
// probabilities); labels are 0 (negative) or 1 (positive). The functions
// are pure; a BinaryMetrics accumulator is thread-compatible.
#ifndef PSFLOW_COMMON_BINARY_METRICS_H_
#define PSFLOW_COMMON_BINARY_METRICS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace psflow {

// The exact ROC AUC: the probability that a random positive scores above a
// random negative, a tie counting one half (the Mann-Whitney U statistic
// over positives x negatives), computed by sorting: O(n log n) time, O(n)
// memory. InvalidArgument when the spans differ in size, when a label is
// not 0 or 1, when a score is NaN, or when only one class is present (the
// AUC is undefined then); the message names the first bad index.
absl::StatusOr<double> AreaUnderRoc(absl::Span<const float> scores,
                                    absl::Span<const uint8_t> labels);

// Probabilities are clipped to [kLogLossEpsilon, 1 - kLogLossEpsilon]
// before their logarithm, so one confident mistake costs at most ~16.1.
inline constexpr double kLogLossEpsilon = 1e-7;

// The mean binary cross-entropy -[y log p + (1 - y) log(1 - p)] over the
// examples, in nats, with p clipped as above. A nonzero label counts as 1.
// NaN when the spans differ in size or are empty (the mean is undefined)
// and when a probability is NaN: a NaN cannot pass for a good score.
double LogLoss(absl::Span<const float> probabilities,
               absl::Span<const uint8_t> labels);

// Collects (probability, label) pairs, e.g. one evaluation batch at a
// time, and scores all of them at the end. Holds 5 bytes per example.
class BinaryMetrics {
 public:
  // InvalidArgument (nothing added) when the spans differ in size, a label
  // is not 0 or 1, or a probability is NaN.
  absl::Status Add(absl::Span<const float> probabilities,
                   absl::Span<const uint8_t> labels);

  int64_t count() const { return static_cast<int64_t>(labels_.size()); }
  int64_t positives() const { return positives_; }
  // positives / count; NaN when empty.
  double PositiveRate() const;
  // AreaUnderRoc over everything added (its errors when one class only).
  absl::StatusOr<double> Auc() const;
  // LogLoss over everything added; NaN when empty.
  double LogLoss() const;

 private:
  std::vector<float> probabilities_;
  std::vector<uint8_t> labels_;
  int64_t positives_ = 0;
  double log_loss_sum_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_BINARY_METRICS_H_
