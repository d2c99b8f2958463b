#include "data/zipf_sampler.h"

#include <cmath>

#include "common/logging.h"
#include "common/splitmix64.h"

namespace psflow {
namespace {

// log(1 + x) / x, continuous at 0.
double Log1pOverX(double x) {
  if (std::abs(x) > 1e-8) return std::log1p(x) / x;
  return 1 - x * (0.5 - x * (1.0 / 3 - x * 0.25));
}

// (exp(x) - 1) / x, continuous at 0.
double Expm1OverX(double x) {
  if (std::abs(x) > 1e-8) return std::expm1(x) / x;
  return 1 + x * 0.5 * (1 + x / 3 * (1 + x * 0.25));
}

// Uniform in [0, 1) from the top 53 bits.
double Uniform(uint64_t& state) {
  return static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
}

}  // namespace

ZipfSampler::ZipfSampler(int64_t n, double exponent)
    : n_(n), exponent_(exponent) {
  CHECK(n >= 1 && exponent > 0)
      << "ZipfSampler(" << n << ", " << exponent << ")";
  h_integral_x1_ = H(1.5) - 1;
  h_integral_n_ = H(static_cast<double>(n) + 0.5);
  s_ = 2 - HInverse(H(2.5) - h(2));
}

int64_t ZipfSampler::Sample(uint64_t& state) const {
  while (true) {
    // Uniform in (h_integral_x1_, h_integral_n_].
    const double u =
        h_integral_n_ + Uniform(state) * (h_integral_x1_ - h_integral_n_);
    const double x = HInverse(u);
    int64_t k = static_cast<int64_t>(x + 0.5);
    if (k < 1) k = 1;
    if (k > n_) k = n_;
    if (static_cast<double>(k) - x <= s_ ||
        u >= H(static_cast<double>(k) + 0.5) - h(static_cast<double>(k))) {
      return k;
    }
  }
}

double ZipfSampler::H(double x) const {
  const double log_x = std::log(x);
  return Expm1OverX((1 - exponent_) * log_x) * log_x;
}

double ZipfSampler::HInverse(double x) const {
  double t = x * (1 - exponent_);
  // Rounding can take t just below -1, outside log1p's domain.
  if (t < -1) t = -1;
  return std::exp(Log1pOverX(t) * x);
}

double ZipfSampler::h(double x) const {
  return std::exp(-exponent_ * std::log(x));
}

}  // namespace psflow
