// A wide-and-deep click-through-rate model (Cheng et al. 2016), the model
// of configs/ctr_wide_deep.json:
//
//   wide:  a linear model on every id (table "linear", one float per id,
//          summed over every field's ids) and on the dense features
//          ("wide/kernel", "wide/bias");
//   deep:  each field's embeddings (table "embedding", `embedding_dim`
//          floats per id) pooled over the field's ids (sum or mean),
//          concatenated with the dense features, through an MLP with ReLU
//          ("deep/dense_<l>/...") to one logit ("deep/logit/...");
//   p = sigmoid(wide + deep), trained with binary cross-entropy.
//
// The MLP runs on the model's Device (CPU or CUDA); pooling, the wide part
// and the loss run on the host, where the pulled rows are. Row gradients
// come back per distinct id (SparseBatch::row_gradients): the trainer
// pushes only the rows the batch touched.
//
// WideDeepDefinition is immutable; a WideDeep is used by one thread at a
// time.
#ifndef PSFLOW_MODEL_WIDE_DEEP_H_
#define PSFLOW_MODEL_WIDE_DEEP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model.h"

namespace psflow {

struct WideDeepSpec {
  int num_fields = 26;     // categorical fields (bags of ids)
  int num_dense = 13;      // dense features per example
  int embedding_dim = 16;  // floats per id in the deep part
  std::vector<int64_t> hidden_sizes = {256, 128};
  enum class Pooling { kSum, kMean };
  Pooling pooling = Pooling::kSum;
  // The tables' settings beyond name and dimension (initializer, own
  // optimizer, admission, eviction); their names and dims are set here.
  EmbeddingTableSpec embedding;
  EmbeddingTableSpec linear;
};

class WideDeepDefinition final : public ModelDefinition {
 public:
  // InvalidArgument naming the field for a bad spec.
  static absl::StatusOr<std::unique_ptr<WideDeepDefinition>> Create(
      const WideDeepSpec& spec);

  std::string Describe() const override;
  float feature_scale() const override { return 1.0f; }
  const std::vector<ModelVariable>& variables() const override {
    return variables_;
  }
  const std::vector<ModelTable>& tables() const override { return tables_; }
  bool binary() const override { return true; }
  absl::StatusOr<std::unique_ptr<Model>> Instantiate(
      Device* device, int64_t max_batch) const override;

  const WideDeepSpec& spec() const { return spec_; }
  // MLP widths: input (fields x dim + dense), hidden..., 1.
  const std::vector<int64_t>& widths() const { return widths_; }

  static constexpr char kEmbeddingTable[] = "embedding";
  static constexpr char kLinearTable[] = "linear";

 private:
  explicit WideDeepDefinition(const WideDeepSpec& spec);

  const WideDeepSpec spec_;
  std::vector<int64_t> widths_;
  std::vector<ModelVariable> variables_;
  std::vector<ModelTable> tables_;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_WIDE_DEEP_H_
