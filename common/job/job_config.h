// The job config (proto/job_config.proto): reading it from JSON, filling
// defaults, validating it, and the derived numbers every role agrees on.
// The chief reads the file; other roles receive the validated message.
#ifndef PSFLOW_COMMON_JOB_JOB_CONFIG_H_
#define PSFLOW_COMMON_JOB_JOB_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/job_config.pb.h"

namespace psflow {

// Parses proto3 JSON (snake_case or lowerCamelCase field names), fills
// defaults and validates. Unknown fields and bad values are
// InvalidArgument naming the field; `source` (a path) prefixes messages.
absl::StatusOr<JobConfig> ParseJobConfig(absl::string_view json,
                                         absl::string_view source);

// Reads and parses a job config file (NotFound when missing).
absl::StatusOr<JobConfig> LoadJobConfigFile(const std::string& path);

// Fills every defaulted field (idempotent).
void FillJobConfigDefaults(JobConfig& config);

// Checks every field; the first problem, naming the field and the fix.
absl::Status ValidateJobConfig(const JobConfig& config);

// Global steps (applied updates) the job runs: `training.steps`, or
// `training.epochs` over `train_examples` examples, where an async step is
// one worker batch and a sync step aggregates replicas_to_aggregate.
int64_t TotalGlobalSteps(const JobConfig& config, int64_t train_examples,
                         int num_workers);

// replicas_to_aggregate, defaulting to every worker.
int ReplicasToAggregate(const JobConfig& config, int num_workers);

// FailedPrecondition when a worker's shard of `train_examples` over
// `num_workers` (sizes differ by at most one) would hold fewer examples
// than one training batch: training drops an epoch's incomplete last
// batch, so such a worker would never take a step.
absl::Status CheckBatchFitsShards(const JobConfig& config,
                                  int64_t train_examples, int num_workers);

// Whether the job names held-out data for its evaluator (IDX test files,
// or a CRITEO test file).
bool HasTestData(const JobConfig& config);

// Where a task writes its TensorBoard event files:
// <logdir>/[<run group>/]<job name>/<role>-<index>, with `logdir_flag`
// overriding the job's logging.log_dir when set.
std::string MetricsDir(const JobConfig& config, const std::string& logdir_flag,
                       const std::string& task_name);

// One line for logs.
std::string JobConfigSummary(const JobConfig& config);

}  // namespace psflow

#endif  // PSFLOW_COMMON_JOB_JOB_CONFIG_H_
