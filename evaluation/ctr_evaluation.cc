#include "evaluation/ctr_evaluation.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/batch_rows.h"
#include "common/binary_metrics.h"
#include "common/status_macros.h"
#include "data/batch_stream.h"
#include "evaluation/model_snapshot.h"
#include "model/registry.h"

namespace psflow {

absl::StatusOr<CtrScores> ScoreCtrOnce(const JobSpec& spec,
                                       ParameterClient& client, Device& device,
                                       const CtrExamples& test) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> definition,
                   DefineJobModel(spec));
  if (!definition->binary()) {
    return absl::InvalidArgumentError(
        "click-through-rate data needs a binary model (model.wide_deep)");
  }
  ASSIGN_OR_RETURN(ModelSnapshot snapshot,
                   PullModelSnapshot(*definition, client));
  const std::vector<std::vector<float>>& values = snapshot.values;
  // No larger than the test set: the model's buffers grow with it.
  const int batch_size = static_cast<int>(std::clamp<int64_t>(
      test.num_examples, 1,
      std::max(1, spec.config().evaluation().batch_size())));
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   definition->Instantiate(&device, batch_size));
  RETURN_IF_ERROR(model->LoadParameters(
      std::vector<absl::Span<const float>>(values.begin(), values.end())));
  BatchRows rows(definition->tables());
  CtrScores scores;
  scores.global_step = snapshot.global_step;
  scores.probabilities.resize(test.num_examples);
  for (int64_t begin = 0; begin < test.num_examples; begin += batch_size) {
    const int64_t n = std::min<int64_t>(batch_size, test.num_examples - begin);
    Batch batch;
    batch.size = static_cast<int>(n);
    batch.num_fields = test.num_fields;
    batch.features.assign(test.dense.begin() + begin * test.num_dense,
                          test.dense.begin() + (begin + n) * test.num_dense);
    batch.labels.assign(test.labels.begin() + begin,
                        test.labels.begin() + begin + n);
    // The bags of examples [begin, begin + n), offsets rebased to 0.
    const int64_t first = test.offsets[begin * test.num_fields];
    const int64_t last = test.offsets[(begin + n) * test.num_fields];
    batch.ids.assign(test.ids.begin() + first, test.ids.begin() + last);
    for (int64_t k = begin * test.num_fields;
         k <= (begin + n) * test.num_fields; ++k) {
      batch.offsets.push_back(test.offsets[k] - first);
    }
    RETURN_IF_ERROR(rows.Prepare(batch));
    RETURN_IF_ERROR(rows.Pull(client, /*train=*/false, 0));
    ExampleBatch example{n, batch.features, batch.labels, 0, &rows.sparse()};
    ASSIGN_OR_RETURN(
        BatchStats stats,
        model->Score(example,
                     absl::MakeSpan(scores.probabilities).subspan(begin, n)));
    scores.correct += stats.correct;
  }
  return scores;
}

absl::StatusOr<EvaluationReport> CtrReport(const CtrScores& scores,
                                           const CtrExamples& test) {
  if (static_cast<int64_t>(scores.probabilities.size()) != test.num_examples) {
    return absl::InvalidArgumentError(
        absl::StrCat(scores.probabilities.size(), " scores for ",
                     test.num_examples, " held-out examples"));
  }
  BinaryMetrics metrics;
  RETURN_IF_ERROR(metrics.Add(scores.probabilities, test.labels));
  EvaluationReport report;
  report.set_global_step(scores.global_step);
  report.set_loss(metrics.count() > 0 ? metrics.LogLoss() : 0);
  report.set_accuracy(metrics.count() > 0
                          ? static_cast<double>(scores.correct) /
                                metrics.count()
                          : 0);
  absl::StatusOr<double> auc = metrics.Auc();
  if (auc.ok()) report.set_auc(*auc);
  return report;
}

absl::StatusOr<EvaluationReport> EvaluateCtrOnce(const JobSpec& spec,
                                                 ParameterClient& client,
                                                 Device& device,
                                                 const CtrExamples& test) {
  ASSIGN_OR_RETURN(CtrScores scores, ScoreCtrOnce(spec, client, device, test));
  return CtrReport(scores, test);
}

}  // namespace psflow
