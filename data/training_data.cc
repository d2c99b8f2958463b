#include "data/training_data.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/criteo.h"
#include "data/dataset.h"

namespace psflow {

TrainingData CtrTrainingData(const JobConfig& job, int64_t num_examples) {
  const CriteoFormat format = CriteoFormatOf(job.data());
  TrainingData data;
  data.num_examples = num_examples;
  data.example_shape = {format.num_dense};
  data.num_classes = 2;
  data.num_fields = format.num_fields;
  return data;
}

namespace {

constexpr int64_t kLimit = int64_t{1} << 62;

// What one example of `data` takes in memory; saturates.
int64_t BytesPerExample(const TrainingData& data) {
  int64_t per_example = 0;
  if (data.num_fields > 0) {
    const int64_t dense = std::clamp<int64_t>(
        data.example_shape.empty() ? 0 : data.example_shape[0], 0,
        int64_t{1} << 40);
    per_example = dense * int64_t{sizeof(float)} + 1 +
                  int64_t{data.num_fields} * 2 * int64_t{sizeof(int64_t)};
  } else {
    per_example = 1;  // the label
    int64_t features = 1;
    for (int64_t d : data.example_shape) {
      if (d <= 0) return 0;
      features = d > kLimit / features ? kLimit : features * d;
    }
    per_example = std::min(kLimit, features + 1);
  }
  return per_example;
}

}  // namespace

absl::Status CheckSameExamplesAsTheChief(int64_t counted, int64_t read,
                                         const std::string& files) {
  if (counted <= 0 || counted == read) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      files, " hold ", read, " examples here, but ", counted,
      " where the chief read them: every task must see the same data files "
      "(the same copy, complete, and relative paths resolved from the same "
      "directory)"));
}

int64_t DataSetBytes(const TrainingData& data) {
  const int64_t per_example = BytesPerExample(data);
  if (data.num_examples <= 0 || per_example <= 0) return 0;
  return per_example > kLimit / data.num_examples
             ? kLimit
             : per_example * data.num_examples;
}

int64_t WorkerDataBytes(const TrainingData& data, int num_workers) {
  const int64_t per_example = BytesPerExample(data);
  if (data.num_examples <= 0 || per_example <= 0) return 0;
  const int64_t workers = std::max(1, num_workers);
  // Halved first so that the sum below stays within int64.
  const int64_t n = std::min(kLimit / 2, data.num_examples);
  const int64_t examples = n + n / workers + 1;
  return per_example > kLimit / examples ? kLimit : per_example * examples;
}

absl::StatusOr<TrainingData> DescribeTrainingData(const JobConfig& job) {
  if (job.data().format() == DataConfig::CRITEO) {
    // Click-through-rate text: read once to count and check every line,
    // holding one line at a time (workers read their own shards).
    ASSIGN_OR_RETURN(CtrExamples examples,
                     DescribeCriteoFile(job.data().train_path(),
                                        CriteoFormatOf(job.data())));
    return CtrTrainingData(job, examples.num_examples);
  }
  // The data's shape and classes from the images' header and the labels:
  // the chief never holds the training set.
  ASSIGN_OR_RETURN(
      DatasetInfo info,
      DescribeIdxDataset(job.data().train_images(), job.data().train_labels()));
  TrainingData data;
  data.num_examples = info.num_examples;
  data.example_shape = std::move(info.example_shape);
  data.num_classes = info.num_classes;
  // The classes the job declares, every training label inside them; or,
  // without a declaration, as many as the labels name.
  if (job.data().num_classes() > 0) {
    RETURN_IF_ERROR(CheckLabels(info.labels, job.data().num_classes(),
                                job.data().train_labels()));
    data.num_classes = job.data().num_classes();
  }
  return data;
}

}  // namespace psflow
