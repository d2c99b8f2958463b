// SplitMix64: a well-mixed 64-bit generator step, written out (not a
// standard-library engine) so that shuffles and initial values are the
// same with every compiler and standard library. Advances `state`.
// Thread-compatible (the caller owns the state).
#ifndef PSFLOW_COMMON_SPLITMIX64_H_
#define PSFLOW_COMMON_SPLITMIX64_H_

#include <cstdint>

namespace psflow {

// SplitMix64's finalizer alone: a fixed bijection of 64-bit values that
// spreads every input bit over every output bit (hashing ids, seeds).
inline uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t SplitMix64(uint64_t& state) {
  return SplitMix64Mix(state += 0x9e3779b97f4a7c15ull);
}

}  // namespace psflow

#endif  // PSFLOW_COMMON_SPLITMIX64_H_
