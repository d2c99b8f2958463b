// What the chief plans from a job config before anything starts: the
// training data's size and shape (read from the files, never held), the
// model defined for that shape, its memory estimate checked against what a
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
#include <vector>

#include "absl/status/statusor.h"
#include "common/host_memory.h"
#include "common/job/placement.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "proto/job_config.pb.h"
#include "proto/ps.pb.h"

namespace psflow {

// What a job's training data tells the chief.
struct TrainingData {
  int64_t num_examples = 0;
  // One example's shape: an image's (e.g. {28, 28}); CRITEO: {num_dense}.
  std::vector<int64_t> example_shape;
  // data.num_classes, or else the largest training label + 1; CRITEO: 2.
  int num_classes = 0;
  // CRITEO: categorical columns per example; IDX: 0.
  int num_fields = 0;
};

// Reads what the chief needs from the training files job.data() names,
// without holding them. CRITEO: every line is read and checked (the
// reader's errors name file, line and fix). IDX: the images file's header
// and every label; the two files must describe one split, and with
// data.num_classes set every label must lie inside it. NotFound for a
// missing file; the readers' InvalidArgument and DataLoss otherwise.
absl::StatusOr<TrainingData> DescribeTrainingData(const JobConfig& job);

// The TrainingData of a CRITEO job whose training file holds
// `num_examples` examples: its shape follows from data.num_dense and
// data.num_fields alone.
TrainingData CtrTrainingData(const JobConfig& job, int64_t num_examples);

struct JobPlanOptions {
  int num_ps = 1;
  int num_workers = 1;
  // What one worker is checked against besides the job's own
  // training.worker_memory_mib: the chief passes AvailableMemory() (its
  // host's memory, or its container's limit).
  HostMemory host;
};

struct JobPlan {
  std::unique_ptr<ModelDefinition> model;
  MemoryEstimate memory;
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
