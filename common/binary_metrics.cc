#include "common/binary_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Sizes match, every label is 0 or 1 and no score is NaN.
absl::Status CheckPairs(absl::Span<const float> scores,
                        absl::Span<const uint8_t> labels, const char* what) {
  if (scores.size() != labels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(scores.size(), " ", what, " but ", labels.size(),
                     " labels; give one label per example"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", i, " is ", static_cast<int>(labels[i]),
                       "; a binary label is 0 or 1"));
    }
    if (std::isnan(scores[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("example ", i,
                       " has a NaN score; the model diverged or read "
                       "uninitialized memory"));
    }
  }
  return absl::OkStatus();
}

double ClippedLogLoss(float probability, bool positive) {
  double p = probability;
  if (std::isnan(p)) return kNaN;
  p = std::min(std::max(p, kLogLossEpsilon), 1 - kLogLossEpsilon);
  return positive ? -std::log(p) : -std::log1p(-p);
}

}  // namespace

absl::StatusOr<double> AreaUnderRoc(absl::Span<const float> scores,
                                    absl::Span<const uint8_t> labels) {
  absl::Status checked = CheckPairs(scores, labels, "scores");
  if (!checked.ok()) return checked;
  int64_t positives = 0;
  for (uint8_t label : labels) positives += label;
  const int64_t negatives = static_cast<int64_t>(labels.size()) - positives;
  if (positives == 0 || negatives == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the AUC is undefined: all ", labels.size(),
                     " examples are ", positives == 0 ? "negative" : "positive",
                     "; score a set that holds both classes"));
  }
  std::vector<std::pair<float, uint8_t>> sorted(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) sorted[i] = {scores[i], labels[i]};
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Twice the Mann-Whitney U: every positive gains 2 per negative scored
  // strictly below it and 1 per negative tied with it. Exact in a double
  // up to 2^53, i.e. for ~9e7 examples of each class.
  double twice_u = 0;
  int64_t negatives_below = 0;
  for (size_t i = 0; i < sorted.size();) {
    size_t end = i;
    int64_t group_positives = 0;
    while (end < sorted.size() && sorted[end].first == sorted[i].first) {
      group_positives += sorted[end].second;
      ++end;
    }
    const int64_t group_negatives =
        static_cast<int64_t>(end - i) - group_positives;
    twice_u += static_cast<double>(group_positives) *
               static_cast<double>(2 * negatives_below + group_negatives);
    negatives_below += group_negatives;
    i = end;
  }
  return twice_u / (2.0 * static_cast<double>(positives) *
                    static_cast<double>(negatives));
}

double LogLoss(absl::Span<const float> probabilities,
               absl::Span<const uint8_t> labels) {
  if (probabilities.size() != labels.size() || labels.empty()) return kNaN;
  double sum = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    sum += ClippedLogLoss(probabilities[i], labels[i] != 0);
  }
  return sum / static_cast<double>(labels.size());
}

absl::Status BinaryMetrics::Add(absl::Span<const float> probabilities,
                                absl::Span<const uint8_t> labels) {
  absl::Status checked = CheckPairs(probabilities, labels, "probabilities");
  if (!checked.ok()) return checked;
  for (size_t i = 0; i < labels.size(); ++i) {
    positives_ += labels[i];
    log_loss_sum_ += ClippedLogLoss(probabilities[i], labels[i] != 0);
  }
  probabilities_.insert(probabilities_.end(), probabilities.begin(),
                        probabilities.end());
  labels_.insert(labels_.end(), labels.begin(), labels.end());
  return absl::OkStatus();
}

double BinaryMetrics::PositiveRate() const {
  if (labels_.empty()) return kNaN;
  return static_cast<double>(positives_) / static_cast<double>(count());
}

absl::StatusOr<double> BinaryMetrics::Auc() const {
  return AreaUnderRoc(probabilities_, labels_);
}

double BinaryMetrics::LogLoss() const {
  if (labels_.empty()) return kNaN;
  return log_loss_sum_ / static_cast<double>(count());
}

}  // namespace psflow
