#include "model/job_plan.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/job/job_config.h"
#include "common/status_macros.h"
#include "model/registry.h"

namespace psflow {

absl::StatusOr<JobPlan> PlanJob(const JobConfig& job, const TrainingData& data,
                                const JobPlanOptions& options) {
  RETURN_IF_ERROR(
      CheckBatchFitsShards(job, data.num_examples, options.num_workers));
  // The parameter servers would refuse it when configured; said here in
  // the job config's terms.
  if (job.training().mode() == SYNC &&
      ReplicasToAggregate(job, options.num_workers) > options.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.replicas_to_aggregate is ",
        job.training().replicas_to_aggregate(), " but the job has ",
        options.num_workers, " worker", options.num_workers == 1 ? "" : "s",
        "; use 1..", options.num_workers,
        " (fewer than the workers makes the rest backups), or leave it out "
        "to aggregate every worker"));
  }
  InputSpec input{data.example_shape, data.num_classes};
  input.num_fields = data.num_fields;
  JobPlan plan;
  ASSIGN_OR_RETURN(plan.model, DefineModel(job.model(), input));
  // A worker that cannot fit is refused now, not killed by the kernel
  // later. Workers on other hosts are checked against the chief's memory:
  // a job declares theirs with training.worker_memory_mib.
  plan.memory = EstimateJobMemory(*plan.model, job);
  plan.memory.data_bytes = WorkerDataBytes(data, options.num_workers);
  RETURN_IF_ERROR(CheckJobMemory(plan.memory, job, 1, options.host.bytes,
                                 options.host.source));
  if (options.has_test_data) {
    plan.evaluation_memory = EstimateEvaluationMemory(
        *plan.model, job, options.test_examples, options.evaluation_threads);
    // The test set is read whole, beside the batch being scored.
    TrainingData test = data;
    test.num_examples = options.test_examples;
    plan.evaluation_memory->data_bytes = DataSetBytes(test);
    RETURN_IF_ERROR(CheckEvaluationMemory(
        *plan.evaluation_memory, options.host.bytes, options.host.source));
  }
  ASSIGN_OR_RETURN(
      plan.placement,
      PlaceVariables(LogicalVariables(plan.model->variables()), options.num_ps,
                     job.training().split_threshold_bytes()));
  for (const ModelTable& table : plan.model->tables()) {
    plan.tables.push_back(table.spec);
    plan.placement.tables.push_back({table.name(), table.dim()});
  }
  return plan;
}

}  // namespace psflow
