// Initial values of a model's variables, determined by the job's seed
// alone (the chief assigns them once, so every run with the same seed
// starts from the same point on any number of servers).
#ifndef PSFLOW_MODEL_INITIALIZER_H_
#define PSFLOW_MODEL_INITIALIZER_H_

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace psflow {

// One vector per variable, in order. Draws come from one SplitMix64 stream
// over the variables in order (variables whose initializer is constant
// draw nothing), so the values are the same on every platform.
std::vector<std::vector<float>> InitialValues(
    const std::vector<ModelVariable>& variables, uint64_t seed);

}  // namespace psflow

#endif  // PSFLOW_MODEL_INITIALIZER_H_
