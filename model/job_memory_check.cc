#include "model/job_memory_check.h"

#include <algorithm>
#include <memory>

#include "common/host_memory.h"
#include "common/status_macros.h"
#include "data/criteo.h"
#include "data/dataset.h"
#include "data/training_data.h"
#include "model/registry.h"

namespace psflow {

absl::StatusOr<MemoryEstimate> CheckJobMemoryOnThisHost(
    const JobConfig& job, int workers_on_this_host, absl::Status* model_error) {
  InputSpec input;
  TrainingData data;  // IDX only: its size is in the images' header
  if (job.data().format() == DataConfig::CRITEO) {
    const CriteoFormat format = CriteoFormatOf(job.data());
    input.example_shape = {format.num_dense};
    input.num_classes = 2;
    input.num_fields = format.num_fields;
  } else {
    ASSIGN_OR_RETURN(DatasetInfo train,
                     DescribeIdxDataset(job.data().train_images(),
                                        job.data().train_labels()));
    input.example_shape = train.example_shape;
    input.num_classes = job.data().num_classes() > 0 ? job.data().num_classes()
                                                     : train.num_classes;
    data.num_examples = train.num_examples;
    data.example_shape = train.example_shape;
  }
  absl::StatusOr<std::unique_ptr<ModelDefinition>> defined =
      DefineModel(job.model(), input);
  if (!defined.ok()) {
    if (model_error != nullptr) *model_error = defined.status();
    return defined.status();
  }
  const std::unique_ptr<ModelDefinition>& model = *defined;
  MemoryEstimate estimate = EstimateJobMemory(*model, job);
  // The CRITEO file's examples are counted by reading every line; the
  // chief's plan does that and checks the data there.
  estimate.data_bytes =
      WorkerDataBytes(data, std::max(1, workers_on_this_host));
  const HostMemory host = AvailableMemory();
  RETURN_IF_ERROR(CheckJobMemory(estimate, job, workers_on_this_host,
                                 host.bytes, host.source));
  return estimate;
}

}  // namespace psflow
