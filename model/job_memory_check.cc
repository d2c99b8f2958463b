#include "model/job_memory_check.h"

#include <memory>

#include "common/host_memory.h"
#include "common/status_macros.h"
#include "data/criteo.h"
#include "data/dataset.h"
#include "model/registry.h"

namespace psflow {

absl::StatusOr<MemoryEstimate> CheckJobMemoryOnThisHost(
    const JobConfig& job, int workers_on_this_host) {
  InputSpec input;
  if (job.data().format() == DataConfig::CRITEO) {
    const CriteoFormat format =
        CriteoFormatOf(job.data().num_dense(), job.data().num_fields());
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
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> model,
                   DefineModel(job.model(), input));
  const MemoryEstimate estimate = EstimateJobMemory(*model, job);
  const HostMemory host = AvailableMemory();
  RETURN_IF_ERROR(CheckJobMemory(estimate, job, workers_on_this_host,
                                 host.bytes, host.source));
  return estimate;
}

}  // namespace psflow
