// Draws ranks from a Zipf (power-law) distribution over 1..n,
// P(k) proportional to k^-exponent, by rejection-inversion (W. Hormann and
// G. Derflinger, "Rejection-inversion to generate variates from monotone
// discrete distributions", 1996; as in Apache Commons RNG): no table, so
// O(1) memory for any n, and fewer than 1.1 tries per draw on average.
//
// Immutable after construction; Sample may be called from any number of
// threads, each with its own generator state.
#ifndef PSFLOW_DATA_ZIPF_SAMPLER_H_
#define PSFLOW_DATA_ZIPF_SAMPLER_H_

#include <cstdint>

namespace psflow {

class ZipfSampler {
 public:
  // Requires n >= 1 and exponent > 0 (CHECKed: callers validate options).
  ZipfSampler(int64_t n, double exponent);

  // A rank in 1..n (1 the most frequent), advancing the SplitMix64 `state`.
  int64_t Sample(uint64_t& state) const;

  int64_t n() const { return n_; }
  double exponent() const { return exponent_; }

 private:
  // H(x), the integral of h(x) = x^-exponent, and its inverse, written to
  // stay accurate near exponent 1.
  double H(double x) const;
  double HInverse(double x) const;
  double h(double x) const;

  int64_t n_;
  double exponent_;
  double h_integral_x1_;  // H(1.5) - 1
  double h_integral_n_;   // H(n + 0.5)
  double s_;              // accept k at once when k - x <= s_
};

}  // namespace psflow

#endif  // PSFLOW_DATA_ZIPF_SAMPLER_H_
