#include "model/wide_deep.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

// Inputs of the MLP beyond which a model is a configuration mistake.
constexpr int64_t kMaxDeepInput = int64_t{1} << 20;

double Sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x))
                : std::exp(x) / (1.0 + std::exp(x));
}

// Binary cross-entropy of logit x for label y, computed stably.
double LogLoss(double x, int y) {
  // -y log p - (1 - y) log(1 - p) = max(x, 0) - x y + log(1 + e^-|x|)
  return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::fabs(x)));
}

class WideDeep final : public Model {
 public:
  WideDeep(const WideDeepDefinition& definition, Device* device,
           int64_t max_batch)
      : spec_(definition.spec()),
        widths_(definition.widths()),
        device_(device),
        max_batch_(max_batch) {}

  absl::Status Allocate() {
    for (size_t l = 0; l + 1 < widths_.size(); ++l) {
      for (auto* list : {&kernels_, &kernel_grads_}) {
        ASSIGN_OR_RETURN(auto a,
                         device_->Allocate(widths_[l] * widths_[l + 1]));
        list->push_back(std::move(a));
      }
      for (auto* list : {&biases_, &bias_grads_}) {
        ASSIGN_OR_RETURN(auto a, device_->Allocate(widths_[l + 1]));
        list->push_back(std::move(a));
      }
    }
    for (int64_t width : widths_) {
      ASSIGN_OR_RETURN(auto a, device_->Allocate(max_batch_ * width));
      activations_.push_back(std::move(a));
      ASSIGN_OR_RETURN(auto g, device_->Allocate(max_batch_ * width));
      activation_grads_.push_back(std::move(g));
    }
    input_.resize(max_batch_ * widths_[0]);
    input_grad_.resize(max_batch_ * widths_[0]);
    logits_.resize(max_batch_);
    wide_kernel_.assign(spec_.num_dense, 0.0f);
    return absl::OkStatus();
  }

  absl::Status LoadParameters(
      const std::vector<absl::Span<const float>>& parameters) override {
    if (parameters.size() != NumVariables()) {
      return absl::InvalidArgumentError(
          absl::StrCat("wide_deep takes ", NumVariables(),
                       " parameter arrays, got ", parameters.size()));
    }
    for (size_t l = 0; l < kernels_.size(); ++l) {
      for (auto [span, array] :
           {std::pair{parameters[2 * l], kernels_[l].get()},
            std::pair{parameters[2 * l + 1], biases_[l].get()}}) {
        if (static_cast<int64_t>(span.size()) != array->size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "wide_deep parameter for deep layer ", l, " has ", span.size(),
              " values, the model needs ", array->size()));
        }
        RETURN_IF_ERROR(device_->Upload(span, *array));
      }
    }
    size_t next = 2 * kernels_.size();
    if (spec_.num_dense > 0) {
      if (parameters[next].size() != wide_kernel_.size()) {
        return absl::InvalidArgumentError("wide/kernel has the wrong size");
      }
      std::copy(parameters[next].begin(), parameters[next].end(),
                wide_kernel_.begin());
      ++next;
    }
    if (parameters[next].size() != 1) {
      return absl::InvalidArgumentError("wide/bias has the wrong size");
    }
    wide_bias_ = parameters[next][0];
    return absl::OkStatus();
  }

  absl::StatusOr<BatchStats> TrainStep(
      const ExampleBatch& batch,
      const std::vector<absl::Span<float>>& gradients) override {
    if (gradients.size() != NumVariables()) {
      return absl::InvalidArgumentError(
          absl::StrCat("wide_deep produces ", NumVariables(),
                       " gradient arrays, got ", gradients.size()));
    }
    for (size_t l = 0; l < kernels_.size(); ++l) {
      if (static_cast<int64_t>(gradients[2 * l].size()) !=
              kernels_[l]->size() ||
          static_cast<int64_t>(gradients[2 * l + 1].size()) !=
              biases_[l]->size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "gradient buffers for deep layer ", l, " have the wrong size"));
      }
    }
    const SparseBatch* sparse = batch.sparse;
    RETURN_IF_ERROR(CheckSparse(batch));
    if (sparse->row_gradients.size() != 2 ||
        sparse->row_gradients[0].size() !=
            static_cast<size_t>(sparse->num_unique) * spec_.embedding_dim ||
        sparse->row_gradients[1].size() !=
            static_cast<size_t>(sparse->num_unique)) {
      return absl::InvalidArgumentError(
          "wide_deep needs row gradient buffers for its two tables, "
          "num_unique x dim each");
    }
    ASSIGN_OR_RETURN(BatchStats stats, Forward(batch));
    const int64_t size = batch.size;
    const int64_t layers = static_cast<int64_t>(kernels_.size());
    // d(mean loss)/d(logit) = (p - y) / batch.
    std::vector<float> dlogit(size);
    for (int64_t i = 0; i < size; ++i) {
      dlogit[i] = static_cast<float>((Sigmoid(logits_[i]) - batch.labels[i]) /
                                     static_cast<double>(size));
    }
    // Wide part, on the host.
    size_t next = 2 * kernels_.size();
    if (spec_.num_dense > 0) {
      absl::Span<float> kernel = gradients[next++];
      std::fill(kernel.begin(), kernel.end(), 0.0f);
      for (int64_t i = 0; i < size; ++i) {
        for (int j = 0; j < spec_.num_dense; ++j) {
          kernel[j] += dlogit[i] * batch.features[i * spec_.num_dense + j];
        }
      }
    }
    float bias = 0;
    for (float g : dlogit) bias += g;
    gradients[next][0] = bias;
    absl::Span<float> linear = sparse->row_gradients[1];
    std::fill(linear.begin(), linear.end(), 0.0f);
    for (int64_t i = 0; i < size; ++i) {
      const int64_t begin = sparse->offsets[i * spec_.num_fields];
      const int64_t end = sparse->offsets[(i + 1) * spec_.num_fields];
      for (int64_t k = begin; k < end; ++k)
        linear[sparse->slots[k]] += dlogit[i];
    }
    // Deep part: back through the MLP on the device, to its input.
    RETURN_IF_ERROR(device_->Upload(dlogit, *activation_grads_[layers]));
    for (int64_t l = layers - 1; l >= 0; --l) {
      const int64_t in = widths_[l], out = widths_[l + 1];
      DeviceArray& grad_out = *activation_grads_[l + 1];
      RETURN_IF_ERROR(device_->Gemm(true, false, in, out, size, 1.0f,
                                    *activations_[l], grad_out, 0.0f,
                                    *kernel_grads_[l]));
      RETURN_IF_ERROR(
          device_->ColumnSums(size, out, grad_out, *bias_grads_[l]));
      RETURN_IF_ERROR(
          device_->DownloadAsync(*kernel_grads_[l], gradients[2 * l]));
      RETURN_IF_ERROR(
          device_->DownloadAsync(*bias_grads_[l], gradients[2 * l + 1]));
      RETURN_IF_ERROR(device_->Gemm(false, true, size, in, out, 1.0f, grad_out,
                                    *kernels_[l], 0.0f, *activation_grads_[l]));
      if (l > 0) {
        RETURN_IF_ERROR(device_->ActivationBackward(
            size * in, Activation::kRelu, *activations_[l],
            *activation_grads_[l]));
      }
    }
    absl::Span<float> input_grad =
        absl::MakeSpan(input_grad_.data(), size * widths_[0]);
    RETURN_IF_ERROR(device_->Download(*activation_grads_[0], input_grad));
    RETURN_IF_ERROR(device_->Synchronize());
    // Each field's pooled gradient goes to every id of its bag.
    const int dim = spec_.embedding_dim;
    absl::Span<float> embedding = sparse->row_gradients[0];
    std::fill(embedding.begin(), embedding.end(), 0.0f);
    for (int64_t i = 0; i < size; ++i) {
      for (int f = 0; f < spec_.num_fields; ++f) {
        const int64_t begin = sparse->offsets[i * spec_.num_fields + f];
        const int64_t end = sparse->offsets[i * spec_.num_fields + f + 1];
        if (begin == end) continue;
        const float scale = spec_.pooling == WideDeepSpec::Pooling::kMean
                                ? 1.0f / static_cast<float>(end - begin)
                                : 1.0f;
        const float* g = input_grad.data() + i * widths_[0] + f * dim;
        for (int64_t k = begin; k < end; ++k) {
          float* row = embedding.data() + int64_t{sparse->slots[k]} * dim;
          for (int j = 0; j < dim; ++j) row[j] += scale * g[j];
        }
      }
    }
    return stats;
  }

  absl::StatusOr<BatchStats> Evaluate(
      const ExampleBatch& batch, absl::Span<int32_t> predictions) override {
    RETURN_IF_ERROR(CheckSparse(batch));
    ASSIGN_OR_RETURN(BatchStats stats, Forward(batch));
    for (int64_t i = 0;
         i < batch.size && i < static_cast<int64_t>(predictions.size()); ++i) {
      predictions[i] = logits_[i] > 0 ? 1 : 0;
    }
    return stats;
  }

  absl::StatusOr<BatchStats> Score(const ExampleBatch& batch,
                                   absl::Span<float> probabilities) override {
    if (static_cast<int64_t>(probabilities.size()) < batch.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("room for ", probabilities.size(),
                       " probabilities for a batch of ", batch.size));
    }
    RETURN_IF_ERROR(CheckSparse(batch));
    ASSIGN_OR_RETURN(BatchStats stats, Forward(batch));
    for (int64_t i = 0; i < batch.size; ++i) {
      probabilities[i] = static_cast<float>(Sigmoid(logits_[i]));
    }
    return stats;
  }

 private:
  size_t NumVariables() const {
    return 2 * kernels_.size() + (spec_.num_dense > 0 ? 2 : 1);
  }

  absl::Status CheckSparse(const ExampleBatch& batch) const {
    const int64_t size = batch.size;
    if (size <= 0 || size > max_batch_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch of ", size, " examples; this model takes 1 to ", max_batch_));
    }
    if (static_cast<int64_t>(batch.features.size()) != size * spec_.num_dense ||
        static_cast<int64_t>(batch.labels.size()) != size) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch of ", size, " examples has ",
                       batch.features.size(), " dense values and ",
                       batch.labels.size(), " labels; wide_deep takes ",
                       spec_.num_dense, " dense features per example"));
    }
    const SparseBatch* sparse = batch.sparse;
    if (sparse == nullptr || sparse->num_fields != spec_.num_fields ||
        static_cast<int64_t>(sparse->offsets.size()) !=
            size * spec_.num_fields + 1 ||
        sparse->slots.size() != sparse->ids.size() ||
        sparse->rows.size() != 2 ||
        sparse->rows[0].size() !=
            static_cast<size_t>(sparse->num_unique) * spec_.embedding_dim ||
        sparse->rows[1].size() != static_cast<size_t>(sparse->num_unique)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wide_deep needs every batch's sparse features: ", spec_.num_fields,
          " fields per example and the rows of both tables"));
    }
    if (sparse->offsets[0] != 0 ||
        sparse->offsets.back() != static_cast<int64_t>(sparse->ids.size())) {
      return absl::InvalidArgumentError("sparse offsets do not cover the ids");
    }
    for (size_t k = 1; k < sparse->offsets.size(); ++k) {
      if (sparse->offsets[k] < sparse->offsets[k - 1]) {
        return absl::InvalidArgumentError("sparse offsets go backwards");
      }
    }
    for (int32_t slot : sparse->slots) {
      if (slot < 0 || slot >= sparse->num_unique) {
        return absl::InvalidArgumentError(
            absl::StrCat("an id's slot ", slot, " is outside the ",
                         sparse->num_unique, " pulled rows"));
      }
    }
    for (int64_t i = 0; i < size; ++i) {
      if (batch.labels[i] != 0 && batch.labels[i] != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("example ", i, " has label ", batch.labels[i],
                         "; a click-through-rate model needs 0 or 1"));
      }
    }
    return absl::OkStatus();
  }

  // Logits of every example into logits_ (deep on the device, wide here);
  // the batch's summed log loss and correct predictions.
  absl::StatusOr<BatchStats> Forward(const ExampleBatch& batch) {
    const int64_t size = batch.size;
    const SparseBatch& sparse = *batch.sparse;
    const int dim = spec_.embedding_dim;
    const int64_t in = widths_[0];
    // The MLP's input: pooled embeddings by field, then the dense features.
    std::fill(input_.begin(), input_.begin() + size * in, 0.0f);
    for (int64_t i = 0; i < size; ++i) {
      float* x = input_.data() + i * in;
      for (int f = 0; f < spec_.num_fields; ++f) {
        const int64_t begin = sparse.offsets[i * spec_.num_fields + f];
        const int64_t end = sparse.offsets[i * spec_.num_fields + f + 1];
        for (int64_t k = begin; k < end; ++k) {
          const float* row =
              sparse.rows[0].data() + int64_t{sparse.slots[k]} * dim;
          for (int j = 0; j < dim; ++j) x[f * dim + j] += row[j];
        }
        if (spec_.pooling == WideDeepSpec::Pooling::kMean && end > begin) {
          const float scale = 1.0f / static_cast<float>(end - begin);
          for (int j = 0; j < dim; ++j) x[f * dim + j] *= scale;
        }
      }
      std::copy_n(batch.features.data() + i * spec_.num_dense, spec_.num_dense,
                  x + spec_.num_fields * dim);
    }
    RETURN_IF_ERROR(device_->Upload(
        absl::MakeConstSpan(input_.data(), size * in), *activations_[0]));
    const size_t layers = kernels_.size();
    for (size_t l = 0; l < layers; ++l) {
      RETURN_IF_ERROR(device_->Gemm(false, false, size, widths_[l + 1],
                                    widths_[l], 1.0f, *activations_[l],
                                    *kernels_[l], 0.0f, *activations_[l + 1]));
      RETURN_IF_ERROR(device_->BiasActivation(
          size, widths_[l + 1], *biases_[l],
          l + 1 == layers ? Activation::kNone : Activation::kRelu,
          *activations_[l + 1]));
    }
    RETURN_IF_ERROR(device_->Download(*activations_[layers],
                                      absl::MakeSpan(logits_.data(), size)));
    BatchStats stats;
    stats.examples = size;
    for (int64_t i = 0; i < size; ++i) {
      double logit = logits_[i] + wide_bias_;
      for (int j = 0; j < spec_.num_dense; ++j) {
        logit += wide_kernel_[j] * batch.features[i * spec_.num_dense + j];
      }
      const int64_t begin = sparse.offsets[i * spec_.num_fields];
      const int64_t end = sparse.offsets[(i + 1) * spec_.num_fields];
      for (int64_t k = begin; k < end; ++k) {
        logit += sparse.rows[1][sparse.slots[k]];
      }
      logits_[i] = static_cast<float>(logit);
      stats.loss_sum += LogLoss(logit, batch.labels[i]);
      if ((logit > 0) == (batch.labels[i] == 1)) ++stats.correct;
    }
    return stats;
  }

  const WideDeepSpec spec_;
  const std::vector<int64_t> widths_;
  Device* const device_;
  const int64_t max_batch_;
  std::vector<std::shared_ptr<DeviceArray>> kernels_, kernel_grads_, biases_,
      bias_grads_, activations_, activation_grads_;
  std::vector<float> input_, input_grad_, logits_;
  std::vector<float> wide_kernel_;
  float wide_bias_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WideDeepDefinition>> WideDeepDefinition::Create(
    const WideDeepSpec& spec) {
  auto invalid = [](absl::string_view field, int64_t value,
                    absl::string_view fix) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.wide_deep.", field, " is ", value, "; ", fix));
  };
  if (spec.num_fields < 1) {
    return invalid("num_fields", spec.num_fields,
                   "a click-through-rate model needs at least one field");
  }
  if (spec.num_dense < 0) {
    return invalid("num_dense", spec.num_dense, "use 0 or more");
  }
  if (spec.embedding_dim < 1 || spec.embedding_dim > 4096) {
    return invalid("embedding_dim", spec.embedding_dim, "use 1 to 4096");
  }
  if (int64_t{spec.num_fields} * spec.embedding_dim + spec.num_dense >
      kMaxDeepInput) {
    return invalid("num_fields x embedding_dim",
                   int64_t{spec.num_fields} * spec.embedding_dim,
                   "the deep part's input is too wide");
  }
  for (size_t i = 0; i < spec.hidden_sizes.size(); ++i) {
    if (spec.hidden_sizes[i] <= 0 || spec.hidden_sizes[i] > kMaxDeepInput) {
      return invalid(absl::StrCat("hidden_sizes[", i, "]"),
                     spec.hidden_sizes[i], "layer widths must be positive");
    }
  }
  return std::unique_ptr<WideDeepDefinition>(new WideDeepDefinition(spec));
}

WideDeepDefinition::WideDeepDefinition(const WideDeepSpec& spec)
    : ModelDefinition(InputSpec{{spec.num_dense}, 2}), spec_(spec) {
  widths_ = {int64_t{spec.num_fields} * spec.embedding_dim + spec.num_dense};
  widths_.insert(widths_.end(), spec.hidden_sizes.begin(),
                 spec.hidden_sizes.end());
  widths_.push_back(1);
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    const std::string name = l + 2 == widths_.size()
                                 ? std::string("deep/logit")
                                 : absl::StrCat("deep/dense_", l);
    variables_.push_back({{name + "/kernel", {widths_[l], widths_[l + 1]}},
                          Initializer::kGlorotUniform});
    variables_.push_back(
        {{name + "/bias", {widths_[l + 1]}}, Initializer::kZeros});
  }
  if (spec.num_dense > 0) {
    variables_.push_back(
        {{"wide/kernel", {spec.num_dense, 1}}, Initializer::kZeros});
  }
  variables_.push_back({{"wide/bias", {1}}, Initializer::kZeros});
  ModelTable embedding{spec.embedding};
  embedding.spec.set_name(kEmbeddingTable);
  embedding.spec.set_dim(spec.embedding_dim);
  ModelTable linear{spec.linear};
  linear.spec.set_name(kLinearTable);
  linear.spec.set_dim(1);
  tables_ = {embedding, linear};
}

std::string WideDeepDefinition::Describe() const {
  return absl::StrCat(
      "wide_deep: ", spec_.num_fields, " fields x ", spec_.embedding_dim, " (",
      spec_.pooling == WideDeepSpec::Pooling::kSum ? "sum" : "mean",
      " pooling) + ", spec_.num_dense, " dense -> mlp ",
      absl::StrJoin(widths_, "-"), " relu; wide linear");
}

absl::StatusOr<std::unique_ptr<Model>> WideDeepDefinition::Instantiate(
    Device* device, int64_t max_batch) const {
  if (max_batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size is ", max_batch, "; it must be positive"));
  }
  auto model = std::make_unique<WideDeep>(*this, device, max_batch);
  RETURN_IF_ERROR(model->Allocate());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace psflow
