// `psctl config check`: every problem a job config would meet when its job
// starts, found without starting anything. It runs the code the roles run:
// the chief's parser and validation (common/job/job_config.h), its reading
// of the training data and its plan (model/job_plan.h: the model for the
// data, its memory against training.worker_memory_mib and this host, the
// placement), the workers' full read of the training files and the
// evaluator's of the test files (evaluation/test_data.h).
//
// Stateless; thread-safe.
#ifndef PSFLOW_CLIENT_PSCTL_JOB_CONFIG_CHECK_H_
#define PSFLOW_CLIENT_PSCTL_JOB_CONFIG_CHECK_H_

#include <string>
#include <vector>

#include "common/host_memory.h"

namespace psflow {

struct JobConfigCheckOptions {
  // The cluster the job would run on (batches must fill every worker's
  // shard; a SYNC job aggregates at most its workers).
  int num_ps = 1;
  int num_workers = 1;
  // What a worker is checked against besides training.worker_memory_mib,
  // as the chief checks it against its own host: AvailableMemory().
  HostMemory host;
};

struct JobConfigReport {
  // Each problem on one line, naming the field or file and the fix, in
  // the order the checks ran; empty when the job would start. Checks that
  // depend on a failed one (the model on data that cannot be read) are
  // skipped, independent ones (the test data) still run.
  std::vector<std::string> problems;
  // When there are none: one line describing the job (name, model and
  // its parameters, servers, workers, steps, data).
  std::string summary;
  // When there are none: further lines (the memory estimate; data that
  // psctl local would generate first).
  std::vector<std::string> details;
};

// Checks the job config file at `path` (relative paths in it are taken
// from the working directory, as the chief takes them).
JobConfigReport CheckJobConfigFile(const std::string& path,
                                   const JobConfigCheckOptions& options);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_JOB_CONFIG_CHECK_H_
