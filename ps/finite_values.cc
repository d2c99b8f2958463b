#include "ps/finite_values.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace psflow {
namespace {

constexpr uint32_t kExponent = 0x7f800000u;

// The largest exponent field of the `n` floats at `bytes`: kExponent iff
// one is NaN/Inf. An integer max (unlike a float sum) may be reordered, so
// gcc vectorizes it; memcpy from a char pointer promises nothing about
// alignment, so it loads them unaligned (a network buffer's floats sit at
// any address).
uint32_t MaxExponent(const char* bytes, size_t n) {
  uint32_t max_exponent = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, bytes + i * sizeof(bits), sizeof(bits));
    max_exponent = std::max(max_exponent, bits & kExponent);
  }
  return max_exponent;
}

uint32_t MaxExponent(absl::Span<const float> values) {
  return MaxExponent(reinterpret_cast<const char*>(values.data()),
                     values.size());
}

}  // namespace

int64_t FirstNonFinite(absl::Span<const float> values) {
  if (MaxExponent(values) != kExponent) return -1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

bool AllFinite(absl::Span<const float> values) {
  return MaxExponent(values) != kExponent;
}

bool AllFiniteAt(const char* bytes, size_t floats) {
  return MaxExponent(bytes, floats) != kExponent;
}

}  // namespace psflow
