// The model a job config describes, as the MlpSpec every role builds: the
// chief (to place and initialize variables), workers and the evaluator.
#ifndef PSFLOW_WORKER_MODEL_MODEL_CONFIG_H_
#define PSFLOW_WORKER_MODEL_MODEL_CONFIG_H_

#include <cstdint>

#include "proto/job_config.pb.h"
#include "worker/model/mlp.h"

namespace psflow {

// `input_size` and `num_classes` come from the training data.
MlpSpec MlpSpecFromConfig(const ModelConfig& config, int64_t input_size,
                          int64_t num_classes);

}  // namespace psflow

#endif  // PSFLOW_WORKER_MODEL_MODEL_CONFIG_H_
