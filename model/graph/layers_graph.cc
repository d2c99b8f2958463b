// `model.layers` as a graph: the layers in a chain, each node named as
// the layer is, so the variables keep their names ("conv2d/kernel").
//
//   pixels [h, w, 1] -> layer 0 -> layer 1 -> ... -> softmax cross-entropy
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/graph/legacy_graphs.h"
#include "model/layers/layer_factory.h"

namespace psflow {

absl::StatusOr<LegacyGraph> LayersGraph(const ModelConfig& config,
                                        const InputSpec& input) {
  for (int64_t d : input.example_shape) {
    if (d < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model input shape is ", ShapeString(input.example_shape),
          "; every dimension must be positive"));
    }
  }
  if (input.num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", input.num_classes,
                     " classes; a classifier needs 2 or more"));
  }
  // Built once here for the names and the errors as model.layers words
  // them; the graph builds the same layers again.
  ASSIGN_OR_RETURN(
      std::vector<std::unique_ptr<Layer>> layers,
      BuildLayers(config.layers(), input.example_shape, input.num_classes));
  LegacyGraph out;
  out.input = input;
  GraphConfig& g = out.graph;
  GraphConfig::Input* features = g.add_inputs();
  std::set<std::string> taken;
  for (const auto& layer : layers) taken.insert(layer->name());
  // The ONNX export's input name, unless a layer has it.
  std::string input_name = "pixels";
  while (taken.count(input_name) != 0) input_name += "_";
  features->set_name(input_name);
  features->mutable_features();
  std::string previous = features->name();
  int64_t parameters = 0;
  for (int i = 0; i < config.layers_size(); ++i) {
    GraphConfig::Node* node = g.add_nodes();
    node->set_name(layers[i]->name());
    node->add_inputs(previous);
    *node->mutable_layer() = config.layers(i);
    previous = node->name();
    for (const ModelVariable& v : layers[i]->variables()) {
      if (v.trainable()) parameters += v.num_elements();
    }
  }
  g.mutable_output()->set_node(previous);
  g.mutable_output()->set_loss(GraphConfig::Output::SOFTMAX_CROSS_ENTROPY);
  out.options.description =
      absl::StrCat("layers ", ShapeString(input.example_shape), " -> ",
                   layers.size(), " layers -> ", input.num_classes,
                   " classes, ", parameters, " trainable parameters");
  return out;
}

}  // namespace psflow
