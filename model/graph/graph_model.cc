#include "model/graph/graph_model.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/splitmix64.h"
#include "common/status_macros.h"
#include "model/device/bindable_array.h"
#include "model/graph/graph_batch.h"
#include "model/graph/host_nodes.h"
#include "model/graph/node_kernels.h"

namespace psflow {
namespace {

double Sigmoid(double x) {
  return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}

// -log p(y) for p = sigmoid(x), without overflow.
double LogLoss(double x, int y) {
  return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::fabs(x)));
}

using Array = std::shared_ptr<DeviceArray>;

class GraphModel final : public Model {
 public:
  GraphModel(const GraphDefinition& definition, Device* device,
             int64_t max_batch)
      : spec_(definition.spec()),
        input_(definition.input()),
        device_(device),
        max_batch_(max_batch),
        sigmoid_(definition.binary()),
        host_(spec_) {}

  absl::Status Allocate(const GraphDefinition& definition) {
    const bool in_place = device_->computes_on_host_memory();
    for (const ModelVariable& v : definition.variables()) {
      ASSIGN_OR_RETURN(Array value, device_->Allocate(v.num_elements()));
      ASSIGN_OR_RETURN(Array gradient, device_->Allocate(v.num_elements()));
      if (in_place) {
        // The kernels hold these arrays; UseParameters and TrainStep
        // point them at the caller's buffers.
        auto bindable_value = std::make_shared<BindableArray>(value);
        auto bindable_gradient = std::make_shared<BindableArray>(gradient);
        bound_values_.push_back(bindable_value.get());
        bound_gradients_.push_back(bindable_gradient.get());
        value = std::move(bindable_value);
        gradient = std::move(bindable_gradient);
      }
      values_.push_back(std::move(value));
      gradients_.push_back(std::move(gradient));
    }
    for (int v = 0; v < spec_.num_values(); ++v) {
      const int64_t size = max_batch_ * NumElements(spec_.shape(v));
      ASSIGN_OR_RETURN(Array value, device_->Allocate(size));
      activations_.push_back(std::move(value));
      Array gradient;
      if (NeedsGradient(v)) {
        ASSIGN_OR_RETURN(gradient, device_->Allocate(size));
      }
      activation_grads_.push_back(std::move(gradient));
    }
    size_t first = 0;
    for (const GraphNode& node : spec_.nodes) {
      LayerArrays arrays;
      for (size_t v = first; v < first + node.variables.size(); ++v) {
        arrays.values.push_back(values_[v].get());
        arrays.gradients.push_back(gradients_[v].get());
      }
      first_variable_.push_back(first);
      first += node.variables.size();
      ASSIGN_OR_RETURN(auto kernel,
                       InstantiateNode(node, device_, max_batch_, arrays));
      kernels_.push_back(std::move(kernel));
    }
    ASSIGN_OR_RETURN(labels_, device_->Allocate(max_batch_));
    ASSIGN_OR_RETURN(predictions_, device_->Allocate(max_batch_));
    ASSIGN_OR_RETURN(stats_, device_->Allocate(2));
    ASSIGN_OR_RETURN(stats_staging_, device_->AllocateHost(2));
    staging_.resize(max_batch_ * MaxValueSize());
    logits_.resize(max_batch_);
    label_staging_.resize(max_batch_);
    return absl::OkStatus();
  }

  absl::Status LoadParameters(
      const std::vector<absl::Span<const float>>& parameters) override {
    for (BindableArray* value : bound_values_) value->Unbind();
    return UploadParameters(*device_, parameters, values_);
  }

  absl::Status UseParameters(
      const std::vector<absl::Span<const float>>& parameters) override {
    if (bound_values_.empty()) return LoadParameters(parameters);
    RETURN_IF_ERROR(CheckParameterSpans(parameters, values_));
    for (size_t v = 0; v < parameters.size(); ++v) {
      // Kernels only read a variable's values (const DeviceArray&), so the
      // caller's const memory is never written.
      bound_values_[v]->Bind(const_cast<float*>(parameters[v].data()));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<BatchStats> TrainStep(
      const ExampleBatch& batch,
      const std::vector<absl::Span<float>>& gradients) override {
    RETURN_IF_ERROR(CheckGradientBuffers(gradients, gradients_));
    // On a device that computes on host memory the kernels write the
    // gradients straight into the caller's buffers, for this step only.
    for (size_t v = 0; v < bound_gradients_.size(); ++v) {
      bound_gradients_[v]->Bind(gradients[v].data());
    }
    absl::Cleanup unbind = [this] {
      for (BindableArray* gradient : bound_gradients_) gradient->Unbind();
    };
    RETURN_IF_ERROR(Forward(batch, /*training=*/true));
    RETURN_IF_ERROR(Backward(batch, gradients));  // synchronizes
    return Stats(batch.size);
  }

  absl::StatusOr<BatchStats> Evaluate(
      const ExampleBatch& batch, absl::Span<int32_t> predictions) override {
    if (!predictions.empty() &&
        static_cast<int64_t>(predictions.size()) < batch.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("room for ", predictions.size(),
                       " predictions for a batch of ", batch.size));
    }
    RETURN_IF_ERROR(Forward(batch, /*training=*/false));
    std::vector<float> staged;
    if (!sigmoid_ && !predictions.empty()) {
      staged.resize(batch.size);
      RETURN_IF_ERROR(
          device_->DownloadAsync(*predictions_, absl::MakeSpan(staged)));
    }
    RETURN_IF_ERROR(device_->Synchronize());
    for (int64_t i = 0; i < batch.size && !predictions.empty(); ++i) {
      predictions[i] = sigmoid_ ? (logits_[i] >= 0 ? 1 : 0)
                                : static_cast<int32_t>(staged[i]);
    }
    return Stats(batch.size);
  }

  absl::StatusOr<BatchStats> Score(const ExampleBatch& batch,
                                   absl::Span<float> probabilities) override {
    if (!sigmoid_) return Model::Score(batch, probabilities);
    if (static_cast<int64_t>(probabilities.size()) < batch.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("room for ", probabilities.size(),
                       " probabilities for a batch of ", batch.size));
    }
    RETURN_IF_ERROR(Forward(batch, /*training=*/false));
    const BatchStats stats = Stats(batch.size);
    for (int64_t i = 0; i < batch.size; ++i) {
      probabilities[i] = static_cast<float>(Sigmoid(logits_[i]));
    }
    return stats;
  }

 private:
  // Node outputs and categorical inputs carry gradients; the features
  // input does not.
  bool NeedsGradient(int value) const {
    return value >= static_cast<int>(spec_.inputs.size()) ||
           spec_.inputs[value].kind == GraphInput::Kind::kCategorical;
  }

  int64_t MaxValueSize() const {
    int64_t size = 1;
    for (int v = 0; v < spec_.num_values(); ++v) {
      size = std::max(size, NumElements(spec_.shape(v)));
    }
    return size;
  }

  // Node k's settings for this batch; its randomness mixes the batch's
  // seed with its position, so two dropout nodes differ.
  StepContext Step(const ExampleBatch& batch, bool training, size_t k) const {
    uint64_t state = batch.seed ^ (0xd1b54a32d192ed03ull * (k + 1));
    return StepContext{batch.size, training, SplitMix64(state)};
  }

  std::vector<const DeviceArray*> Inputs(const GraphNode& node) const {
    std::vector<const DeviceArray*> x;
    for (int v : node.inputs) x.push_back(activations_[v].get());
    return x;
  }

  // A categorical input's value: its field's rows pooled per example.
  absl::Status PoolRows(const ExampleBatch& batch, int value) {
    const GraphInput& input = spec_.inputs[value];
    const int dim = spec_.tables[input.table].dim();
    if (!PoolInput(spec_, *batch.sparse, batch.size, value, /*add=*/false, dim,
                   0, staging_.data())) {
      return absl::InternalError(
          absl::StrCat("table ", spec_.tables[input.table].name(),
                       " has no row for an id of field ", input.field));
    }
    return device_->Upload(
        absl::MakeConstSpan(staging_.data(), batch.size * dim),
        *activations_[value]);
  }

  // The pooled value's gradient back onto the rows it came from.
  absl::Status ScatterRows(const ExampleBatch& batch, int value) {
    const int dim = spec_.tables[spec_.inputs[value].table].dim();
    RETURN_IF_ERROR(
        device_->Download(*activation_grads_[value],
                          absl::MakeSpan(staging_.data(), batch.size * dim)));
    ScatterInput(spec_, *batch.sparse, batch.size, value, dim, 0,
                 staging_.data());
    return absl::OkStatus();
  }

  // Queues the forward pass and the loss on the device. The batch's stats
  // are ready for Stats() after the device's next Synchronize (the sigmoid
  // loss, on the host, synchronizes itself), so a training step waits for
  // the device once, at its end.
  absl::Status Forward(const ExampleBatch& batch, bool training) {
    RETURN_IF_ERROR(
        CheckGraphBatch(spec_, input_, max_batch_, batch, training));
    const int64_t size = batch.size;
    for (int v = 0; v < static_cast<int>(spec_.inputs.size()); ++v) {
      if (spec_.inputs[v].kind == GraphInput::Kind::kFeatures) {
        RETURN_IF_ERROR(device_->Upload(batch.features, *activations_[v]));
      } else if (!host_.fused(v)) {
        RETURN_IF_ERROR(PoolRows(batch, v));
      }
    }
    for (size_t k = 0; k < spec_.nodes.size(); ++k) {
      const int value = static_cast<int>(spec_.inputs.size() + k);
      if (host_.on_host(k)) {
        const int64_t n = size * NumElements(spec_.nodes[k].output);
        const absl::Span<float> out = absl::MakeSpan(staging_.data(), n);
        RETURN_IF_ERROR(host_.Forward(spec_, k, batch, out));
        RETURN_IF_ERROR(device_->Upload(out, *activations_[value]));
        continue;
      }
      RETURN_IF_ERROR(kernels_[k]->Forward(Step(batch, training, k),
                                           Inputs(spec_.nodes[k]),
                                           *activations_[value]));
    }
    DeviceArray& logits = *activations_[spec_.output];
    DeviceArray* dlogits =
        training ? activation_grads_[spec_.output].get() : nullptr;
    if (sigmoid_) return SigmoidLoss(batch, logits, dlogits);
    std::copy(batch.labels.begin(), batch.labels.end(), label_staging_.begin());
    RETURN_IF_ERROR(device_->Upload(
        absl::MakeConstSpan(label_staging_.data(), size), *labels_));
    RETURN_IF_ERROR(device_->SoftmaxCrossEntropy(size, input_.num_classes,
                                                 logits, *labels_, dlogits,
                                                 *predictions_, *stats_));
    return device_->DownloadAsync(*stats_, stats_staging_->span());
  }

  // The last Forward's stats, once the device has synchronized since.
  BatchStats Stats(int64_t size) const {
    if (sigmoid_) return sigmoid_stats_;
    const absl::Span<const float> stats = stats_staging_->span();
    return BatchStats{stats[0], static_cast<int64_t>(stats[1]), size};
  }

  // One logit per example: the log loss, and its gradient (mean over the
  // batch) into `dlogits` when training.
  absl::Status SigmoidLoss(const ExampleBatch& batch, const DeviceArray& logits,
                           DeviceArray* dlogits) {
    const int64_t size = batch.size;
    std::vector<float> z(size);
    RETURN_IF_ERROR(device_->Download(logits, absl::MakeSpan(z)));
    BatchStats stats{0, 0, size};
    std::vector<float> grad(size);
    for (int64_t i = 0; i < size; ++i) {
      logits_[i] = z[i];
      const int y = batch.labels[i];
      stats.loss_sum += LogLoss(z[i], y);
      stats.correct += (z[i] >= 0 ? 1 : 0) == y;
      grad[i] = static_cast<float>((Sigmoid(z[i]) - y) / size);
    }
    sigmoid_stats_ = stats;
    if (dlogits != nullptr) RETURN_IF_ERROR(device_->Upload(grad, *dlogits));
    return absl::OkStatus();
  }

  // Nodes in reverse: every reader of a value runs before its producer, so
  // its gradient is whole when its producer needs it.
  absl::Status Backward(const ExampleBatch& batch,
                        const std::vector<absl::Span<float>>& gradients) {
    // Row gradients, unless the batch asks for none (SparseBatch).
    const bool rows =
        !spec_.tables.empty() && !batch.sparse->row_gradients.empty();
    for (size_t t = 0; rows && t < spec_.tables.size(); ++t) {
      absl::Span<float> grads = batch.sparse->row_gradients[t];
      std::fill(grads.begin(), grads.end(), 0.0f);
    }
    std::vector<bool> written(spec_.num_values(), false);
    written[spec_.output] = true;
    // Variables whose gradients were downloaded, in backward's order, and
    // how many of them batch.gradient_ready has heard of. The CPU device
    // downloads at once (DownloadAsync is Download there), so its spans
    // are final as soon as the call returns and each node's are reported
    // right away. A device that queues work (CUDA) has written a span only
    // after a Synchronize: rather than stall the device after every node,
    // its variables are reported together after the final Synchronize.
    std::vector<int> finished;
    size_t reported = 0;
    const bool report_at_once = device_->kind() == DeviceKind::kCpu;
    for (size_t k = spec_.nodes.size(); k-- > 0;) {
      const GraphNode& node = spec_.nodes[k];
      const int value = static_cast<int>(spec_.inputs.size() + k);
      if (host_.on_host(k)) {  // no variables; its inputs are graph inputs
        const absl::Span<float> dy = absl::MakeSpan(
            staging_.data(), batch.size * NumElements(node.output));
        if (rows) {
          RETURN_IF_ERROR(device_->Download(*activation_grads_[value], dy));
          host_.Backward(spec_, k, batch, dy);
        }
        continue;
      }
      std::vector<DeviceArray*> dx;
      std::vector<bool> accumulate;
      for (int v : node.inputs) {
        dx.push_back(activation_grads_[v].get());
        accumulate.push_back(written[v]);
        if (NeedsGradient(v)) written[v] = true;
      }
      RETURN_IF_ERROR(kernels_[k]->Backward(
          Step(batch, true, k), Inputs(node), *activations_[value],
          *activation_grads_[value], dx, accumulate));
      // This node's gradients are final: their copy to the host overlaps
      // the nodes before it on devices that copy asynchronously.
      for (size_t v = first_variable_[k];
           v < first_variable_[k] + node.variables.size(); ++v) {
        if (bound_gradients_.empty()) {  // otherwise written in place
          RETURN_IF_ERROR(device_->DownloadAsync(*gradients_[v], gradients[v]));
        }
        finished.push_back(static_cast<int>(v));
      }
      if (report_at_once) ReportReady(batch, finished, reported);
    }
    for (int v = 0; v < static_cast<int>(spec_.inputs.size()); ++v) {
      if (rows && spec_.inputs[v].kind == GraphInput::Kind::kCategorical &&
          !host_.fused(v)) {
        RETURN_IF_ERROR(ScatterRows(batch, v));
      }
    }
    RETURN_IF_ERROR(device_->Synchronize());
    ReportReady(batch, finished, reported);
    return absl::OkStatus();
  }

  // Tells batch.gradient_ready (if set) of finished[reported..], in order.
  static void ReportReady(const ExampleBatch& batch,
                          const std::vector<int>& finished, size_t& reported) {
    for (; reported < finished.size(); ++reported) {
      if (batch.gradient_ready) batch.gradient_ready(finished[reported]);
    }
  }

  // Copies: a model may outlive its definition.
  const GraphSpec spec_;
  const InputSpec input_;
  Device* const device_;
  const int64_t max_batch_;
  const bool sigmoid_;
  const HostNodes host_;
  std::vector<std::unique_ptr<NodeKernel>> kernels_;
  std::vector<size_t> first_variable_;  // per node
  // Per variable, in the definition's order.
  std::vector<Array> values_, gradients_;
  // The same arrays where the device computes on host memory; empty
  // otherwise.
  std::vector<BindableArray*> bound_values_, bound_gradients_;
  // Per value (inputs, then nodes); no gradient for the features.
  std::vector<Array> activations_, activation_grads_;
  Array labels_, predictions_, stats_;
  std::shared_ptr<HostBuffer> stats_staging_;
  std::vector<float> staging_;  // a pooled input or its gradient
  std::vector<float> logits_;   // sigmoid: the last forward's
  std::vector<float> label_staging_;
  BatchStats sigmoid_stats_;  // sigmoid: the last forward's
};

}  // namespace

GraphDefinition::GraphDefinition(const InputSpec& input, GraphSpec spec,
                                 const GraphOptions& options)
    : ModelDefinition(input),
      spec_(std::move(spec)),
      feature_scale_(options.feature_scale),
      description_(options.description) {
  variables_ = spec_.Variables();
  for (const EmbeddingTableSpec& table : spec_.tables) {
    tables_.push_back(ModelTable{table, {}});
  }
  // Each table holds rows of its inputs' fields only; a table of every
  // field lists none (ModelTable::fields).
  std::vector<std::set<int>> fields(tables_.size());
  for (const GraphInput& in : spec_.inputs) {
    if (in.kind == GraphInput::Kind::kCategorical) {
      fields[in.table].insert(in.field);
    }
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (static_cast<int>(fields[t].size()) < input.num_fields) {
      tables_[t].fields.assign(fields[t].begin(), fields[t].end());
    }
  }
}

namespace {

// The options' names and initializers on the spec's variables (the
// layers' kernels take their arrays by position, not by name).
absl::Status ApplyVariableOptions(const GraphOptions& options,
                                  GraphSpec& spec) {
  size_t renamed = 0, initialized = 0;
  for (GraphNode& node : spec.nodes) {
    for (ModelVariable& v : node.variables) {
      if (auto it = options.initializers.find(v.name());
          it != options.initializers.end()) {
        v.initializer = it->second;
        ++initialized;
      }
      if (auto it = options.variable_names.find(v.name());
          it != options.variable_names.end()) {
        v.variable.name = it->second;
        ++renamed;
      }
    }
  }
  if (renamed != options.variable_names.size() ||
      initialized != options.initializers.size()) {
    return absl::InternalError(
        "graph options name a variable the graph does not have");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GraphDefinition>> GraphDefinition::Create(
    const GraphConfig& graph, const InputSpec& input,
    const GraphOptions& options) {
  InputSpec graph_input = input;
  if (!options.features_shape.empty()) {
    if (NumElements(options.features_shape) != input.num_features()) {
      return absl::InternalError(absl::StrCat(
          "features reshaped to ", ShapeString(options.features_shape),
          " from ", ShapeString(input.example_shape)));
    }
    graph_input.example_shape = options.features_shape;
  }
  ASSIGN_OR_RETURN(GraphSpec spec, BuildGraphSpec(graph, graph_input));
  RETURN_IF_ERROR(ApplyVariableOptions(options, spec));
  return std::unique_ptr<GraphDefinition>(
      new GraphDefinition(input, std::move(spec), options));
}

std::string GraphDefinition::Describe() const {
  if (!description_.empty()) return description_;
  const auto count = [](size_t n, const char* what) {
    return absl::StrCat(n, " ", what, n == 1 ? "" : "s");
  };
  return absl::StrCat("graph of ", count(spec_.nodes.size(), "node"), ", ",
                      count(spec_.inputs.size(), "input"), ", ",
                      count(spec_.tables.size(), "table"));
}

bool GraphDefinition::binary() const {
  return spec_.loss == GraphConfig::Output::SIGMOID_CROSS_ENTROPY;
}

std::vector<ModelPart> GraphDefinition::MemoryParts() const {
  // As GraphModel::Allocate: every input's values (and a categorical
  // one's gradient); per node its output, that output's gradient and what
  // its kernel allocates.
  std::vector<ModelPart> parts;
  for (const GraphInput& in : spec_.inputs) {
    const int64_t size = NumElements(in.shape);
    parts.push_back(
        {in.name, 0,
         in.kind == GraphInput::Kind::kCategorical ? 2 * size : size});
  }
  for (const GraphNode& node : spec_.nodes) {
    const int64_t scratch = NodeScratchFloatsPerExample(node);
    ModelPart part{node.name,
                   0,
                   2 * NumElements(node.output) + scratch,
                   scratch,
                   NodeScratchCapFloats(node),
                   NodeScratchFloatsPerThread(node),
                   NodeScratchFloatsFixed(node)};
    for (const ModelVariable& v : node.variables) {
      part.parameters += v.num_elements();
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

absl::StatusOr<std::unique_ptr<Model>> GraphDefinition::Instantiate(
    Device* device, int64_t max_batch) const {
  if (max_batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size is ", max_batch, "; it must be positive"));
  }
  auto model = std::make_unique<GraphModel>(*this, device, max_batch);
  RETURN_IF_ERROR(model->Allocate(*this));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace psflow
