#include "data/training_data.h"

#include <utility>

#include "common/status_macros.h"
#include "data/criteo.h"
#include "data/dataset.h"

namespace psflow {

TrainingData CtrTrainingData(const JobConfig& job, int64_t num_examples) {
  const CriteoFormat format =
      CriteoFormatOf(job.data().num_dense(), job.data().num_fields());
  TrainingData data;
  data.num_examples = num_examples;
  data.example_shape = {format.num_dense};
  data.num_classes = 2;
  data.num_fields = format.num_fields;
  return data;
}

absl::StatusOr<TrainingData> DescribeTrainingData(const JobConfig& job) {
  if (job.data().format() == DataConfig::CRITEO) {
    // Click-through-rate text: read once to count and check every line,
    // holding one line at a time (workers read their own shards).
    ASSIGN_OR_RETURN(
        CtrExamples examples,
        DescribeCriteoFile(
            job.data().train_path(),
            CriteoFormatOf(job.data().num_dense(), job.data().num_fields())));
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
