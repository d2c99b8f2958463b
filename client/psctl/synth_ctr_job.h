// A CRITEO job's `data.synthesize` (proto/job_config.proto): `psctl local`
// generates the planted-model data set it names (data/synth_ctr.h) when
// data.train_path does not exist yet, and `psctl config check` checks such
// a job as it will be once generated.
#ifndef PSFLOW_CLIENT_PSCTL_SYNTH_CTR_JOB_H_
#define PSFLOW_CLIENT_PSCTL_SYNTH_CTR_JOB_H_

#include "absl/status/statusor.h"
#include "data/synth_ctr.h"
#include "proto/job_config.pb.h"

namespace psflow {

// Whether `job` is CRITEO, sets data.synthesize and its training file does
// not exist yet (not even as a link).
bool SynthesizesCtrData(const JobConfig& job);

// For a job whose data.synthesize set exists already: FailedPrecondition
// when the planted.json beside it records other settings than the config
// asks for (the job would train on the stale set); OK otherwise, and for a
// folder without planted.json (data of the user's own).
absl::Status CheckSynthesizedDataMatches(const JobConfig& job);

// The generator's options data.synthesize names (its zeros keep the
// generator's defaults; the columns follow data.num_dense and
// data.num_fields), writing into the directory of data.train_path.
// InvalidArgument, naming the fields and the fix, when train_path and
// test_path are not <dir>/train.txt and <dir>/test.txt, a setting is
// negative (or NaN), or one is out of the generator's bounds.
absl::StatusOr<SynthCtrOptions> SynthCtrOptionsOf(const JobConfig& job);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_SYNTH_CTR_JOB_H_
