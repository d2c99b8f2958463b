// A `model.layers` network (Keras' Sequential API): the layers of
// model/layers/ applied in order, the last one's outputs the logits of a
// softmax cross-entropy loss. Reached through the registry as the "layers"
// kind; nothing outside model/ names these classes.
//
// Variables are the layers' in order ("conv2d/kernel", "batch_normalization/
// moving_mean", ...). Batch normalization's moving statistics are
// moving-average variables: TrainStep writes the batch's statistics where
// their gradients would go, and the parameter servers average them in.
//
// SequentialDefinition is immutable; a Sequential is used by one thread at a
// time.
#ifndef PSFLOW_MODEL_SEQUENTIAL_H_
#define PSFLOW_MODEL_SEQUENTIAL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/layers/layer.h"
#include "model/layers/layer_factory.h"
#include "model/model.h"

namespace psflow {

class SequentialDefinition final : public ModelDefinition {
 public:
  // InvalidArgument naming the layer for any mistake (layer_factory.h).
  static absl::StatusOr<std::unique_ptr<SequentialDefinition>> Create(
      const LayerConfigs& layers, const InputSpec& input);

  std::string Describe() const override;
  float feature_scale() const override { return 1.0f; }
  const std::vector<ModelVariable>& variables() const override {
    return variables_;
  }
  absl::StatusOr<std::unique_ptr<Model>> Instantiate(
      Device* device, int64_t max_batch) const override;
  // The input, then each layer: its output and gradient, its scratch.
  std::vector<ModelPart> MemoryParts() const override;

  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }

 private:
  SequentialDefinition(const InputSpec& input,
                       std::vector<std::unique_ptr<Layer>> layers);

  const std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<ModelVariable> variables_;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_SEQUENTIAL_H_
