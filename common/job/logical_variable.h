// A logical variable: a named dense float32 tensor as a model declares it
// and as checkpoints record it, before placement splits it over parameter
// servers (common/job/placement.h). Plain value.
#ifndef PSFLOW_COMMON_JOB_LOGICAL_VARIABLE_H_
#define PSFLOW_COMMON_JOB_LOGICAL_VARIABLE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace psflow {

// How pushes to a variable change it on the parameter servers.
enum class VariableUpdate {
  // A push is d(mean loss)/d(variable), applied by the job's optimizer.
  kOptimizer,
  // A non-trainable statistic (batch normalization's moving mean and
  // variance): a push is the batch's value x, and the server sets
  // v = momentum * v + (1 - momentum) * x. No optimizer slots, no
  // learning rate.
  kMovingAverage,
};

struct LogicalVariable {
  std::string name;
  std::vector<int64_t> shape;  // row-major; empty for a scalar
  VariableUpdate update = VariableUpdate::kOptimizer;
  // kMovingAverage only: in [0, 1).
  float momentum = 0;

  // The product of the dimensions (1 for a scalar).
  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_JOB_LOGICAL_VARIABLE_H_
