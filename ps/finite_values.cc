#include "ps/finite_values.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace psflow {
namespace {

constexpr uint32_t kExponent = 0x7f800000u;

// The largest exponent field in `values`: kExponent iff one is NaN/Inf.
// An integer max (unlike a float sum) may be reordered, so gcc vectorizes
// it.
uint32_t MaxExponent(const float* v, size_t n) {
  uint32_t max_exponent = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], sizeof(bits));
    max_exponent = std::max(max_exponent, bits & kExponent);
  }
  return max_exponent;
}

// MaxExponent over floats at any alignment: memcpy from a char pointer
// promises the compiler nothing, so it loads them unaligned.
uint32_t MaxExponentAt(const char* bytes, size_t n) {
  uint32_t max_exponent = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, bytes + i * sizeof(bits), sizeof(bits));
    max_exponent = std::max(max_exponent, bits & kExponent);
  }
  return max_exponent;
}

}  // namespace

int64_t FirstNonFinite(absl::Span<const float> values) {
  if (MaxExponent(values.data(), values.size()) != kExponent) return -1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

bool AllFinite(absl::Span<const float> values) {
  return MaxExponent(values.data(), values.size()) != kExponent;
}

bool AllFiniteAt(const char* bytes, size_t floats) {
  return MaxExponentAt(bytes, floats) != kExponent;
}

}  // namespace psflow
