// Evaluation of an image classifier (MLP or layer model) on held-out
// examples: loss, accuracy and per-class accuracy, from the live model on
// the parameter servers, from a checkpoint's files, or from given values.
// Used by the evaluator and by the chief's own final evaluation.
//
// Stateless functions; `device` is used by one call at a time.
#ifndef PSFLOW_EVALUATION_IMAGE_EVALUATION_H_
#define PSFLOW_EVALUATION_IMAGE_EVALUATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "data/dataset.h"
#include "model/device/device.h"
#include "proto/coordinator.pb.h"

namespace psflow {

// One evaluation of the model in `client` (a consistent snapshot) on
// `data` (every example).
absl::StatusOr<EvaluationReport> EvaluateOnce(const JobSpec& spec,
                                              ParameterClient& client,
                                              Device& device,
                                              const Dataset& data);

// One evaluation of the checkpoint at `path` (its values, CRC-checked).
// NotFound when it vanished, DataLoss when it is damaged.
absl::StatusOr<EvaluationReport> EvaluateCheckpoint(const JobSpec& spec,
                                                    const std::string& path,
                                                    Device& device,
                                                    const Dataset& data);

// One evaluation of the model's variables given as `values` (in the
// model's variable order), reported at `global_step`.
absl::StatusOr<EvaluationReport> EvaluateValues(
    const JobSpec& spec, const std::vector<std::vector<float>>& values,
    int64_t global_step, Device& device, const Dataset& data);

}  // namespace psflow

#endif  // PSFLOW_EVALUATION_IMAGE_EVALUATION_H_
