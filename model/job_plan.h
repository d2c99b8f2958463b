// What the chief plans from a job config before anything starts: for the
// training data's size and shape (data/training_data.h), the model defined
// for that shape, its memory estimate checked against what a
// worker has, and the variables placed over the parameter servers. The
// chief (chief/chief_runner.cc) plans every job this way, and `psctl
// config check` runs the same code to find a job's problems without
// starting it.
//
// Stateless; thread-safe.
#ifndef PSFLOW_MODEL_JOB_PLAN_H_
#define PSFLOW_MODEL_JOB_PLAN_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/host_memory.h"
#include "common/job/placement.h"
#include "data/training_data.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "proto/job_config.pb.h"
#include "proto/ps.pb.h"

namespace psflow {

struct JobPlanOptions {
  int num_ps = 1;
  int num_workers = 1;
  // What one worker is checked against besides the job's own
  // training.worker_memory_mib: the chief passes AvailableMemory() (its
  // host's memory, or its container's limit).
  HostMemory host;
  // The test set's examples when the job has one and they are known (0:
  // none or unknown): the evaluation's batch is checked against `host`,
  // capped at this.
  bool has_test_data = false;
  int64_t test_examples = 0;
  // The compute threads the evaluation is checked for (0: the job's
  // training.cpu_threads): the chief, which may score the final model
  // itself, passes the threads it would use.
  int evaluation_threads = 0;
};

struct JobPlan {
  std::unique_ptr<ModelDefinition> model;
  MemoryEstimate memory;
  // The evaluation's (EstimateEvaluationMemory), when there is test data.
  std::optional<MemoryEstimate> evaluation_memory;
  // The model's variables over the servers, its tables on every server.
  Placement placement;
  // What the chief creates each table with, in the model's tables() order.
  std::vector<EmbeddingTableSpec> tables;
};

// Plans `job` on `data` for options.num_ps servers and options.num_workers
// workers, in the chief's order: every worker's shard must fill a batch
// (FailedPrecondition, CheckBatchFitsShards), a SYNC job cannot aggregate
// more replicas than it has workers (InvalidArgument), the model must take
// the data (the registry's InvalidArgument), a worker must fit its memory
// (ResourceExhausted naming the figures and the largest layers,
// CheckJobMemory), and the variables are placed.
absl::StatusOr<JobPlan> PlanJob(const JobConfig& job, const TrainingData& data,
                                const JobPlanOptions& options);

}  // namespace psflow

#endif  // PSFLOW_MODEL_JOB_PLAN_H_
