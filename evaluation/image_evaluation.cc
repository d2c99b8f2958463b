#include "evaluation/image_evaluation.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/reader.h"
#include "common/status_macros.h"
#include "evaluation/model_snapshot.h"
#include "model/registry.h"

namespace psflow {

absl::StatusOr<EvaluationReport> EvaluateOnce(const JobSpec& spec,
                                              ParameterClient& client,
                                              Device& device,
                                              const Dataset& data) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> model,
                   DefineJobModel(spec));
  ASSIGN_OR_RETURN(ModelSnapshot snapshot, PullModelSnapshot(*model, client));
  return EvaluateValues(spec, snapshot.values, snapshot.global_step, device,
                        data);
}

absl::StatusOr<EvaluationReport> EvaluateCheckpoint(const JobSpec& spec,
                                                    const std::string& path,
                                                    Device& device,
                                                    const Dataset& data) {
  ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                   CheckpointReader::Open(path));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> model,
                   DefineJobModel(spec));
  std::vector<std::vector<float>> values;
  for (const ModelVariable& v : model->variables()) {
    const CheckpointTensor* tensor = reader->Find(v.name());
    if (tensor == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " has no variable \"", v.name(), "\"; it is not this job's"));
    }
    // Its shape before its values: a checkpoint's index is only a claim,
    // and a tensor of another model must not be read whole first.
    if (!std::equal(tensor->shape().begin(), tensor->shape().end(),
                    v.shape().begin(), v.shape().end())) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": variable \"", v.name(), "\" has shape [",
          absl::StrJoin(tensor->shape(), ", "), "] but the job's model has [",
          absl::StrJoin(v.shape(), ", "), "]; it is not this job's"));
    }
    ASSIGN_OR_RETURN(std::vector<float> tensor_values, reader->Read(*tensor));
    values.push_back(std::move(tensor_values));
  }
  return EvaluateValues(spec, values, reader->index().global_step(), device,
                        data);
}

absl::StatusOr<EvaluationReport> EvaluateValues(
    const JobSpec& spec, const std::vector<std::vector<float>>& values,
    int64_t global_step, Device& device, const Dataset& data) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> definition,
                   DefineJobModel(spec));
  // No larger than the test set: the model's buffers grow with it.
  const int batch_size = static_cast<int>(std::clamp<int64_t>(
      data.num_examples, 1,
      std::max(1, spec.config().evaluation().batch_size())));
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   definition->Instantiate(&device, batch_size));
  RETURN_IF_ERROR(model->LoadParameters(
      std::vector<absl::Span<const float>>(values.begin(), values.end())));
  const float scale = definition->feature_scale();

  std::vector<int64_t> class_total(spec.num_classes()),
      class_correct(spec.num_classes());
  double loss = 0;
  int64_t correct = 0, seen = 0;
  std::vector<float> features;
  std::vector<int32_t> labels, predictions;
  for (int64_t begin = 0; begin < data.num_examples; begin += batch_size) {
    const int64_t n = std::min<int64_t>(batch_size, data.num_examples - begin);
    features.resize(n * data.num_features);
    labels.resize(n);
    predictions.resize(n);
    for (int64_t i = 0; i < n * data.num_features; ++i) {
      features[i] = data.features[begin * data.num_features + i] * scale;
    }
    for (int64_t i = 0; i < n; ++i) labels[i] = data.labels[begin + i];
    ASSIGN_OR_RETURN(
        BatchStats stats,
        model->Evaluate({n, features, labels}, absl::MakeSpan(predictions)));
    loss += stats.loss_sum;
    correct += stats.correct;
    seen += n;
    for (int64_t i = 0; i < n; ++i) {
      ++class_total[labels[i]];
      class_correct[labels[i]] += predictions[i] == labels[i];
    }
  }
  EvaluationReport report;
  report.set_global_step(global_step);
  report.set_loss(seen > 0 ? loss / seen : 0);
  report.set_accuracy(seen > 0 ? static_cast<double>(correct) / seen : 0);
  for (size_t c = 0; c < class_total.size(); ++c) {
    report.add_per_class_accuracy(class_total[c] > 0
                                      ? static_cast<double>(class_correct[c]) /
                                            class_total[c]
                                      : 0);
  }
  return report;
}

}  // namespace psflow
