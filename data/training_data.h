// The training data's size and shape, as the chief plans a job from it
// (model/job_plan.h) and `psctl config check` reports it: read from the
// files job.data() names without holding them.
//
// Stateless; thread-safe.
#ifndef PSFLOW_DATA_TRAINING_DATA_H_
#define PSFLOW_DATA_TRAINING_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"

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

// About what one of `num_workers` workers holds of `data`: every example
// as it reads the training file, and its shard copied out of them (IDX:
// a byte per pixel and label; CRITEO: the dense floats, the label, and a
// bag offset and an id per field). Saturates rather than overflows.
int64_t WorkerDataBytes(const TrainingData& data, int num_workers);

// What holding all of `data` takes (the test set, which the evaluator and
// the chief's final evaluation read whole), as WorkerDataBytes counts an
// example. Saturates rather than overflows.
int64_t DataSetBytes(const TrainingData& data);

// A task's read of data the chief counted first: OK when the chief
// counted none (`counted` 0: an older chief) or as many as `read`;
// otherwise FailedPrecondition naming both counts and `files`: this task
// sees other data than the chief (another copy, a file still being
// written, a relative path from another directory), and its shard of it
// would overlap or leave out the others'.
absl::Status CheckSameExamplesAsTheChief(int64_t counted, int64_t read,
                                         const std::string& files);

// The TrainingData of a CRITEO job whose training file holds
// `num_examples` examples: its shape follows from data.num_dense and
// data.num_fields alone.
TrainingData CtrTrainingData(const JobConfig& job, int64_t num_examples);

}  // namespace psflow

#endif  // PSFLOW_DATA_TRAINING_DATA_H_
