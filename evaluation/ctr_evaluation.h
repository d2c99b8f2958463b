// Evaluation of a model with embedding tables (wide_deep) on held-out
// click-through-rate examples: the dense variables pulled as one
// consistent snapshot, each batch's rows pulled without creating any (an
// id the servers never saw reads as its initial row), the model's
// probabilities scored by AUC, log loss and accuracy at 0.5.
#ifndef PSFLOW_EVALUATION_CTR_EVALUATION_H_
#define PSFLOW_EVALUATION_CTR_EVALUATION_H_

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "data/ctr_examples.h"
#include "model/device/device.h"
#include "proto/coordinator.pb.h"

namespace psflow {

absl::StatusOr<EvaluationReport> EvaluateCtrOnce(const JobSpec& spec,
                                                 ParameterClient& client,
                                                 Device& device,
                                                 const CtrExamples& test);

}  // namespace psflow

#endif  // PSFLOW_EVALUATION_CTR_EVALUATION_H_
