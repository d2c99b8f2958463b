// Dropout's keep-or-drop draw for one element, written once for the CPU and
// CUDA backends (it compiles as host and device code) so that a seed gives
// bit-identical masks everywhere: element i of a mask drawn with `seed` is
// 0 with probability `rate`, else 1 / (1 - rate). Counter-based (a
// SplitMix64 finalizer of seed and index), so elements are independent and
// can be drawn in any order or in parallel.
#ifndef PSFLOW_MODEL_DEVICE_DROPOUT_HASH_H_
#define PSFLOW_MODEL_DEVICE_DROPOUT_HASH_H_

#include <cstdint>

#ifdef __CUDACC__
#define PSFLOW_HOST_DEVICE __host__ __device__
#else
#define PSFLOW_HOST_DEVICE
#endif

namespace psflow {

PSFLOW_HOST_DEVICE inline float DropoutScale(uint64_t seed, uint64_t i,
                                             float rate) {
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  // 24 random bits: a float in [0, 1) with every value exact.
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  return u < rate ? 0.0f : 1.0f / (1.0f - rate);
}

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_DROPOUT_HASH_H_
