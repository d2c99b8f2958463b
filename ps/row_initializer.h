// The initial value of an embedding row, a function of the table's seed and
// the row's id only: the same id gets the same row on any server, under any
// number of servers, in any order of first use, and again after it was
// evicted. (A generator shared by the rows would make a row depend on which
// rows were created before it.)
//
// Thread-safe (immutable).
#ifndef PSFLOW_PS_ROW_INITIALIZER_H_
#define PSFLOW_PS_ROW_INITIALIZER_H_

#include <cstdint>

#include "absl/types/span.h"

namespace psflow {

struct RowInitializer {
  enum class Kind {
    kZeros,
    // Uniform in [-scale, scale) (Keras' Embedding uses 0.05).
    kUniform,
    // Normal with standard deviation `scale`, redrawn beyond two standard
    // deviations (TensorFlow's embedding columns use 1 / sqrt(dimension)).
    kTruncatedNormal,
  };
  Kind kind = Kind::kTruncatedNormal;
  float scale = 0.25f;
  uint64_t seed = 0;

  // Writes the row of `id` (out.size() is the dimension).
  void Fill(int64_t id, absl::Span<float> out) const;
};

}  // namespace psflow

#endif  // PSFLOW_PS_ROW_INITIALIZER_H_
