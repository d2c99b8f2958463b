// NaN/Inf checks over gradient values, written so that gcc vectorizes them
// (one integer max over the exponent bits), and a copy that checks as it
// goes: a push's gradients are checked while they are still in the cache
// from being copied out of the network's or a shared region's buffers,
// instead of in a second pass over memory.
//
// Pure functions; thread-safe.
#ifndef PSFLOW_PS_FINITE_VALUES_H_
#define PSFLOW_PS_FINITE_VALUES_H_

#include <cstdint>

#include "absl/types/span.h"

namespace psflow {

// The index of the first NaN/Inf in `values`, or -1.
int64_t FirstNonFinite(absl::Span<const float> values);

// Whether every value is finite (no NaN, no Inf).
bool AllFinite(absl::Span<const float> values);

// Copies `from` into `to` (the same size; CHECKed, a caller's bug) in
// blocks, checking each block as it lands; whether every value copied was
// finite. The values checked are the ones in `to`, so a source that
// changes meanwhile (a client's shared memory) cannot slip a NaN past it.
bool CopyAllFinite(absl::Span<const float> from, absl::Span<float> to);

}  // namespace psflow

#endif  // PSFLOW_PS_FINITE_VALUES_H_
