// Evaluation of a model with embedding tables (wide_deep) on held-out
// click-through-rate examples: the dense variables pulled as one
// consistent snapshot, each batch's rows pulled without creating any (an
// id the servers never saw reads as its initial row), the model's
// probabilities scored by AUC, log loss and accuracy at 0.5.
#ifndef PSFLOW_EVALUATION_CTR_EVALUATION_H_
#define PSFLOW_EVALUATION_CTR_EVALUATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "data/ctr_examples.h"
#include "model/device/device.h"
#include "proto/coordinator.pb.h"

namespace psflow {

// What one pass of the live model over the held-out examples gives.
struct CtrScores {
  int64_t global_step = 0;           // of the dense snapshot read
  std::vector<float> probabilities;  // one per example, in `test`'s order
  int64_t correct = 0;               // the model's own count at 0.5
};

// The pass EvaluateCtrOnce scores: each example's click probability,
// evaluation.batch_size examples at a time. Also for tools that compare
// psflow's predictions with another runtime's
// (bench/onnx_test_set_check.py). InvalidArgument for a model that is not
// binary; the pulls' errors.
absl::StatusOr<CtrScores> ScoreCtrOnce(const JobSpec& spec,
                                       ParameterClient& client, Device& device,
                                       const CtrExamples& test);

// AUC, log loss and accuracy of `scores` against `test`'s labels (no AUC
// when they hold one class only). InvalidArgument unless `scores` has one
// probability per example.
absl::StatusOr<EvaluationReport> CtrReport(const CtrScores& scores,
                                           const CtrExamples& test);

// CtrReport(ScoreCtrOnce(...)): what the evaluator reports.
absl::StatusOr<EvaluationReport> EvaluateCtrOnce(const JobSpec& spec,
                                                 ParameterClient& client,
                                                 Device& device,
                                                 const CtrExamples& test);

}  // namespace psflow

#endif  // PSFLOW_EVALUATION_CTR_EVALUATION_H_
