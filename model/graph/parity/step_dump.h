// A `model.graph` job's model trained for a few steps on random batches
// (random_batches.h) with plain SGD applied here, every number recorded,
// so that another implementation of the same graph (torch_twin.py) can
// replay the steps from the same starting point and compare: the loss,
// the probabilities, every variable's gradient and every table row's.
//
// The model is psflow's own: GraphDefinition on the CPU device (or the
// one StepDumpOptions names), initial values from InitialValues (the
// chief's), rows uniform random. Between steps, trainable variables and
// rows take v -= learning_rate * gradient; moving-average variables
// (BatchNormalization's statistics) take v = momentum * v + (1 -
// momentum) * batch statistic, as the parameter servers apply them. Plain
// SGD keeps the replay free of any optimizer's details: what is compared
// is the model.
//
// The dump (WriteStepDump) is a JSON manifest and a blob of float32
// values (little-endian) beside it; parity_check.py documents and reads
// both.
//
// Stateless functions.
#ifndef PSFLOW_MODEL_GRAPH_PARITY_STEP_DUMP_H_
#define PSFLOW_MODEL_GRAPH_PARITY_STEP_DUMP_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/graph/parity/random_batches.h"
#include "model/layers/layer.h"
#include "model/model.h"
#include "proto/job_config.pb.h"

namespace psflow {

struct StepDumpOptions {
  RandomBatchOptions batch;
  int steps = 3;
  float learning_rate = 0.1f;
  // Initial rows of every table are uniform in [-row_scale, row_scale),
  // whatever the table's own initializer (ZEROS would leave the wide
  // tables' forward untested at the first step).
  float row_scale = 0.1f;
  uint64_t seed = 1;  // initial values, rows and batches
  // The device the model runs on (it must outlive the call); null: the
  // CPU device with one thread. model/graph:graph_cuda_test runs the same
  // steps on the CPU and on a GPU and compares the two dumps.
  Device* device = nullptr;
};

struct StepRecord {
  RandomBatch batch;
  double loss = 0;  // mean over the batch (TrainStep)
  // Model::Score on the same batch and parameters: inference mode, so
  // BatchNormalization uses the moving statistics.
  std::vector<float> probabilities;
  std::vector<std::vector<float>> gradients;  // per variable
  // Per table, [num_ids x dim]: each row's gradient, zero for ids the
  // batch does not hold (the model gets, as from the trainer, each
  // table's rows of its own fields' ids only: SparseBatch::table_slots).
  std::vector<std::vector<float>> row_gradients;
};

struct StepDump {
  InputSpec input;
  GraphConfig graph;
  // Every input's and node's per-example shape as psflow inferred it.
  std::vector<std::pair<std::string, Shape>> values;
  std::vector<ModelVariable> variables;
  std::vector<ModelTable> tables;
  int64_t num_ids = 0;  // rows per table (random_batches.h)
  std::vector<std::vector<float>> initial_values;  // per variable
  std::vector<std::vector<float>> initial_rows;    // per table
  std::vector<StepRecord> steps;
};

// Runs `options.steps` steps of `job`'s graph model on `options.device`.
// InvalidArgument when the job has no `model.graph` or its data is not CRITEO
// (the batches are CRITEO-shaped), or for the graph's own mistakes.
absl::StatusOr<StepDump> RunGraphSteps(const JobConfig& job,
                                       const StepDumpOptions& options);

// Writes `dump` to `manifest_path` (JSON) and its values to the same path
// with ".f32" for ".json". `config_path` and `options` are recorded.
absl::Status WriteStepDump(const StepDump& dump, const std::string& config_path,
                           const StepDumpOptions& options,
                           const std::string& manifest_path);

}  // namespace psflow

#endif  // PSFLOW_MODEL_GRAPH_PARITY_STEP_DUMP_H_
