#include "data/planted_ctr_model.h"

#include <cmath>

#include "common/splitmix64.h"

namespace psflow {
namespace {

// Separate the weight streams of ids and dense columns.
constexpr uint64_t kIdSalt = 0x6964776569676874ull;     // "idweight"
constexpr uint64_t kDenseSalt = 0x64656e7365776774ull;  // "densewgt"

}  // namespace

double StandardNormalFromHash(uint64_t bits) {
  const uint64_t second = SplitMix64Mix(bits ^ 0x9e3779b97f4a7c15ull);
  // u1 in (0, 1], so its log is finite; u2 in [0, 1).
  const double u1 = static_cast<double>((bits >> 11) + 1) * 0x1.0p-53;
  const double u2 = static_cast<double>(second >> 11) * 0x1.0p-53;
  constexpr double kTwoPi = 6.283185307179586;
  return std::sqrt(-2 * std::log(u1)) * std::cos(kTwoPi * u2);
}

PlantedCtrModel::PlantedCtrModel(uint64_t seed, int num_dense,
                                 double weight_scale, double bias)
    : key_(SplitMix64Mix(seed ^ kIdSalt)),
      weight_scale_(weight_scale),
      bias_(bias) {
  const uint64_t dense_key = SplitMix64Mix(seed ^ kDenseSalt);
  for (int d = 0; d < num_dense; ++d) {
    dense_weights_.push_back(
        weight_scale / 2 *
        StandardNormalFromHash(SplitMix64Mix(dense_key + uint64_t(d))));
  }
}

double PlantedCtrModel::CategoricalWeight(int64_t id) const {
  return weight_scale_ * StandardNormalFromHash(
                             SplitMix64Mix(static_cast<uint64_t>(id) ^ key_));
}

double PlantedCtrModel::Logit(absl::Span<const float> dense,
                              absl::Span<const int64_t> ids) const {
  double logit = bias_;
  for (size_t d = 0; d < dense.size() && d < dense_weights_.size(); ++d) {
    logit += dense_weights_[d] * dense[d];
  }
  for (int64_t id : ids) logit += CategoricalWeight(id);
  return logit;
}

float PlantedCtrModel::Probability(absl::Span<const float> dense,
                                   absl::Span<const int64_t> ids) const {
  return static_cast<float>(Sigmoid(Logit(dense, ids)));
}

double PlantedCtrModel::Sigmoid(double logit) {
  return logit >= 0 ? 1 / (1 + std::exp(-logit))
                    : std::exp(logit) / (1 + std::exp(logit));
}

}  // namespace psflow
