#include "ps/row_initializer.h"

#include <cmath>

#include "common/splitmix64.h"

namespace psflow {
namespace {

// A uniform double in (0, 1): 53 random bits, never exactly 0.
double Uniform01(uint64_t& state) {
  return (static_cast<double>(SplitMix64(state) >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace

void RowInitializer::Fill(int64_t id, absl::Span<float> out) const {
  if (kind == Kind::kZeros) {
    for (float& v : out) v = 0.0f;
    return;
  }
  // One stream per (seed, id).
  uint64_t state = SplitMix64Mix(
      seed ^ SplitMix64Mix(static_cast<uint64_t>(id) ^ 0xa54ff53a5f1d36f1ull));
  if (kind == Kind::kUniform) {
    for (float& v : out) {
      v = static_cast<float>((2.0 * Uniform01(state) - 1.0) * scale);
    }
    return;
  }
  constexpr double kTwoPi = 6.283185307179586;
  for (float& v : out) {
    double z;
    do {  // Box-Muller; about 5% of draws fall beyond 2 sigma and repeat
      const double r = std::sqrt(-2.0 * std::log(Uniform01(state)));
      z = r * std::cos(kTwoPi * Uniform01(state));
    } while (std::fabs(z) > 2.0);
    v = static_cast<float>(z * scale);
  }
}

}  // namespace psflow
