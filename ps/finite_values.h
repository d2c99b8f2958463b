// NaN/Inf checks over gradient values, written so that gcc vectorizes them
// (one integer max over the exponent bits), and the select every update
// loop reads a gradient through.
//
// Pure functions; thread-safe.
#ifndef PSFLOW_PS_FINITE_VALUES_H_
#define PSFLOW_PS_FINITE_VALUES_H_

#include <cstdint>
#include <cstring>

#include "absl/types/span.h"

namespace psflow {

// The index of the first NaN/Inf in `values`, or -1.
int64_t FirstNonFinite(absl::Span<const float> values);

// Whether every value is finite (no NaN, no Inf).
bool AllFinite(absl::Span<const float> values);

// The same over `floats` floats at `bytes`, at any alignment (a network
// buffer's, common/rpc/bulk_frame.h), read where they lie.
bool AllFiniteAt(const char* bytes, size_t floats);

// `g`, or 0 where it is NaN or Inf. Every update loop reads its gradient
// through this: a push from a client's shared memory is checked whole and
// then read where it lies, and a client could write that memory in
// between; what it wrote never reaches a variable. gcc vectorizes it to an
// and, a compare and a blend.
inline float FiniteOrZero(float g) {
  uint32_t bits;
  std::memcpy(&bits, &g, sizeof(bits));
  // A mask, not a branch: loops with a division vectorize only so.
  bits &= (bits & 0x7f800000u) == 0x7f800000u ? 0u : ~0u;
  std::memcpy(&g, &bits, sizeof(bits));
  return g;
}

}  // namespace psflow

#endif  // PSFLOW_PS_FINITE_VALUES_H_
