// A job's memory, checked before any process starts (psctl local, for all
// the workers it starts on this host): the model defined for the data's
// shape (read from the files' headers and labels only) and its estimate
// (model/memory_estimate.h) against this host, or the container, it runs
// on. The chief's own check, and psctl config check's, is part of its plan
// (model/job_plan.h).
#ifndef PSFLOW_MODEL_JOB_MEMORY_CHECK_H_
#define PSFLOW_MODEL_JOB_MEMORY_CHECK_H_

#include "absl/status/statusor.h"
#include "model/memory_estimate.h"
#include "proto/job_config.pb.h"

namespace psflow {

// The estimate for `job`, once `workers_on_this_host` workers of it fit
// this host's (or container's) memory and each fits the job's declared
// training.worker_memory_mib. ResourceExhausted naming the figures and the
// largest layers when not; the data's and the model's own errors as they
// are. `model_error` (optional) is set to the model's error alone, so a
// caller can tell a job config whose model cannot take its data (a bad
// config) from data it cannot read yet.
absl::StatusOr<MemoryEstimate> CheckJobMemoryOnThisHost(
    const JobConfig& job, int workers_on_this_host,
    absl::Status* model_error = nullptr);

}  // namespace psflow

#endif  // PSFLOW_MODEL_JOB_MEMORY_CHECK_H_
