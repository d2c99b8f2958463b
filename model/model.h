// The model interface every role sees. A job config's `model` message
// becomes a ModelDefinition (model/registry.h): what the model declares
// (its variables, their kinds and initializers) without any device, which
// is all the chief and checkpoints need; a definition instantiates Models
// on a Device for the workers (training) and the evaluator (inference).
//
// Variables live on the parameter servers; a Model holds a device copy
// that LoadParameters() refreshes before each step. The roles never know
// which kind of model they run.
//
// ModelDefinition is immutable and thread-safe. A Model is used by one
// thread at a time and must not outlive its Device.
#ifndef PSFLOW_MODEL_MODEL_H_
#define PSFLOW_MODEL_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job/logical_variable.h"
#include "model/device/device.h"
#include "proto/ps.pb.h"

namespace psflow {

// How a variable's starting values are drawn (model/initializer.h).
enum class Initializer {
  kZeros,
  kOnes,
  // U(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)), for a
  // [fan_in, fan_out] kernel (Keras' default for Dense).
  kGlorotUniform,
};

// A variable a model declares: name, row-major shape, how pushes update it
// (LogicalVariable::update: trainable, or a moving average the model
// pushes batch statistics to), initializer.
struct ModelVariable {
  LogicalVariable variable;
  Initializer initializer = Initializer::kZeros;

  const std::string& name() const { return variable.name; }
  const std::vector<int64_t>& shape() const { return variable.shape; }
  int64_t num_elements() const { return variable.num_elements(); }
  bool trainable() const {
    return variable.update == VariableUpdate::kOptimizer;
  }
};

// The variables as placement and checkpoints see them.
std::vector<LogicalVariable> LogicalVariables(
    const std::vector<ModelVariable>& variables);

// A sparse embedding table a model declares: rows keyed by int64 ids,
// held by the parameter servers (ps/embedding_table.h) and pulled per
// batch. `spec` is what the chief creates it with (name, dimension,
// initializer, optimizer, admission and eviction).
struct ModelTable {
  EmbeddingTableSpec spec;
  // The categorical fields whose ids the model looks up in this table;
  // empty: every field. A batch pulls and pushes only those ids' rows.
  std::vector<int> fields;

  const std::string& name() const { return spec.name(); }
  int dim() const { return spec.dim(); }
};

// A batch's sparse features, for models with tables. Example i's field f
// holds the ids ids[offsets[i * num_fields + f] .. offsets[... + 1]) (a
// bag: none, one or several). The trainer pulls every distinct id's row
// once: slots[k] is id k's index among the distinct ids of the batch.
// Table t (the definition's tables() order) holds rows of the distinct ids
// of its fields (ModelTable::fields) only: table_slots[t][k] is id k's row
// in rows[t] (table_rows[t] x dim), -1 for an id of another field; a table
// of every field has table_slots[t] == slots. TrainStep writes
// d(mean loss)/d(row) into row_gradients[t] (the size of rows[t], every
// row written) when it is not empty.
struct SparseBatch {
  int num_fields = 0;
  absl::Span<const int64_t> offsets;
  absl::Span<const int64_t> ids;
  absl::Span<const int32_t> slots;
  int64_t num_unique = 0;
  std::vector<absl::Span<const int32_t>> table_slots;
  std::vector<int64_t> table_rows;
  std::vector<absl::Span<const float>> rows;
  std::vector<absl::Span<float>> row_gradients;
};

// What a model is built for: one example's shape (e.g. {28, 28} for
// Fashion-MNIST images) and the number of classes.
struct InputSpec {
  std::vector<int64_t> example_shape;
  int64_t num_classes = 0;
  // Categorical fields per example (bags of ids), for models with tables.
  int num_fields = 0;

  // Values per example: the product of example_shape.
  int64_t num_features() const;
};

// A batch of examples: `size` rows of features (row-major, each
// InputSpec::num_features() values, already scaled) and class ids.
struct ExampleBatch {
  int64_t size = 0;
  absl::Span<const float> features;
  absl::Span<const int32_t> labels;
  // Randomness for this training step (dropout masks): the same seed gives
  // the same masks. Trainers derive it from the job's seed, the worker and
  // its step.
  uint64_t seed = 0;
  // Models with tables only.
  const SparseBatch* sparse = nullptr;
  // Training only, optional: TrainStep calls it once per variable (its
  // index in variables() order) as soon as that variable's gradient span
  // holds its final value, in the order backward finishes them (the last
  // layer's first), on the calling thread and before TrainStep returns, so
  // the caller may send each gradient while earlier layers still compute.
  // A model may report a variable late (at the end of the step), never
  // before its span is final; a variable it does not report is final when
  // TrainStep returns. A step that fails may have reported some variables
  // before it failed.
  std::function<void(int variable_index)> gradient_ready = nullptr;
};

// Sums over a batch.
struct BatchStats {
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t examples = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  // Copies parameters to the device, one span per variable in the
  // definition's variables() order, each exactly that variable's size
  // (InvalidArgument otherwise). Spans in memory from Device::AllocateHost
  // are copied asynchronously: leave them unchanged until the next
  // TrainStep or Evaluate returns.
  virtual absl::Status LoadParameters(
      const std::vector<absl::Span<const float>>& parameters) = 0;

  // Like LoadParameters, but the model may read `parameters` in place
  // rather than copy them: the caller keeps them valid until the next
  // UseParameters or LoadParameters call (or the model's end), and
  // unchanged while TrainStep, Evaluate or Score runs. A trainer that pulls
  // into buffers of its own saves a copy of the model per step on a device
  // that computes on host memory (Device::computes_on_host_memory); the
  // default copies.
  virtual absl::Status UseParameters(
      const std::vector<absl::Span<const float>>& parameters) {
    return LoadParameters(parameters);
  }

  // Training mode: forward and backward over `batch` (1 to max_batch
  // examples). Writes d(mean loss)/d(variable) into `gradients`, one span
  // per variable in variables() order, and returns the batch's loss and
  // accuracy sums. Gradients may start copying out while later layers
  // compute; host memory from Device::AllocateHost makes that overlap.
  virtual absl::StatusOr<BatchStats> TrainStep(
      const ExampleBatch& batch,
      const std::vector<absl::Span<float>>& gradients) = 0;

  // Inference mode: forward only. The predicted class of each example goes
  // to `predictions` when it is non-empty (then at least batch.size long).
  virtual absl::StatusOr<BatchStats> Evaluate(
      const ExampleBatch& batch, absl::Span<int32_t> predictions) = 0;

  // Binary models: inference mode, each example's probability of the
  // positive class into `probabilities` (at least batch.size long), for
  // AUC and log loss. A multi-class model has none: Unimplemented.
  virtual absl::StatusOr<BatchStats> Score(const ExampleBatch& batch,
                                           absl::Span<float> probabilities);
};

// InvalidArgument unless `parameters` has one span per array of `values`,
// each exactly its size.
absl::Status CheckParameterSpans(
    const std::vector<absl::Span<const float>>& parameters,
    const std::vector<std::shared_ptr<DeviceArray>>& values);
// For models that keep one device array per variable: uploads
// `parameters` (one span per variable, each exactly its array's size;
// InvalidArgument otherwise) into `values`.
absl::Status UploadParameters(
    Device& device, const std::vector<absl::Span<const float>>& parameters,
    const std::vector<std::shared_ptr<DeviceArray>>& values);
// InvalidArgument unless `buffers` has one span per gradient array, each
// exactly its size.
absl::Status CheckGradientBuffers(
    const std::vector<absl::Span<float>>& buffers,
    const std::vector<std::shared_ptr<DeviceArray>>& gradients);

// One part of a model as a worker's memory sees it (model/memory_estimate.h):
// a layer, or the input.
struct ModelPart {
  std::string name;
  // Floats of its variables.
  int64_t parameters = 0;
  // Device floats per example of a batch: its outputs, their gradients and
  // its kernel's scratch.
  int64_t floats_per_example = 0;
  // Of those, the scratch's, and the most floats of it a batch of any size
  // takes on the CPU backend (0: no cap): a convolution's patches beyond
  // what that backend builds whole it builds a few images at a time.
  int64_t scratch_per_example = 0;
  int64_t scratch_cap = 0;
  // Floats each CPU backend thread holds for it, whatever the batch
  // (Layer::ScratchFloatsPerThread).
  int64_t scratch_per_thread = 0;
  // Floats the CPU backend holds for it once, whatever the batch and the
  // threads (Layer::ScratchFloatsFixed).
  int64_t scratch_fixed = 0;

  // Device floats for a batch of `batch`: floats_per_example x batch, the
  // scratch capped; saturates instead of overflowing.
  int64_t FloatsForBatch(int64_t batch) const;
};

class ModelDefinition {
 public:
  virtual ~ModelDefinition() = default;

  // One line for logs, e.g. "mlp 784-256-10 relu".
  virtual std::string Describe() const = 0;

  const InputSpec& input() const { return input_; }

  // What the data pipeline multiplies raw pixel bytes by before a batch
  // reaches the model: 1/255 for the MLP kinds, which expect values in
  // [0, 1]; 1 for a `layers` model, which scales its input itself (with a
  // Rescaling layer), as a Keras model does.
  virtual float feature_scale() const { return 1.0f / 255; }

  // Every variable the model owns, in a fixed order that LoadParameters,
  // TrainStep and initial values follow.
  virtual const std::vector<ModelVariable>& variables() const = 0;

  // The sparse embedding tables the model reads (none for dense models),
  // in the order of SparseBatch::rows.
  virtual const std::vector<ModelTable>& tables() const;

  // What an instance of the model allocates, part by part, as
  // Instantiate does. The default: one part holding every variable and
  // no per-example memory (models that allocate per example override it).
  virtual std::vector<ModelPart> MemoryParts() const;

  // Whether the model predicts one probability (click-through rate: AUC
  // and log loss) rather than a class among input().num_classes.
  virtual bool binary() const { return false; }

  // A model on `device` (which must outlive it) for batches of up to
  // `max_batch` examples. InvalidArgument for max_batch < 1;
  // ResourceExhausted when device memory runs out.
  virtual absl::StatusOr<std::unique_ptr<Model>> Instantiate(
      Device* device, int64_t max_batch) const = 0;

 protected:
  explicit ModelDefinition(InputSpec input) : input_(std::move(input)) {}

 private:
  const InputSpec input_;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_MODEL_H_
