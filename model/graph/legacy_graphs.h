// The model kinds that came before `model.graph`, translated into graphs:
// `mlp` and `softmax_regression`, `model.layers` and `wide_deep` each
// become a GraphConfig that the graph model (graph_model.h) runs, so there
// is one model implementation. The translation keeps what each kind
// promised: its variables' names, shapes, order and initializers (so
// checkpoints restore and exports keep their names), its table names, its
// input scaling and its error messages. docs/models.md shows each graph.
//
// Stateless; thread-safe.
#ifndef PSFLOW_MODEL_GRAPH_LEGACY_GRAPHS_H_
#define PSFLOW_MODEL_GRAPH_LEGACY_GRAPHS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/graph/graph_model.h"
#include "model/model.h"
#include "proto/job_config.pb.h"

namespace psflow {

// A kind's graph and what GraphDefinition::Create needs beside it.
struct LegacyGraph {
  GraphConfig graph;
  GraphOptions options;
  // The input the graph is defined for (wide_deep: binary labels).
  InputSpec input;
};

// `mlp` and `softmax_regression` (mlp_graph.cc): Dense "dense_<l>" layers
// on the flattened example, the kind's activation between them.
// InvalidArgument for widths that are not positive, an input shape with a
// dimension below 1 or fewer than 2 classes.
absl::Status ValidateMlpConfig(const ModelConfig& config);
absl::StatusOr<LegacyGraph> MlpGraph(const ModelConfig& config,
                                     const InputSpec& input);

// `model.layers` (layers_graph.cc): a chain of nodes named as the layers
// are ("conv2d", "dense_1", ...). InvalidArgument naming the layer
// (model.layers[i]) for any mistake, as layer_factory.h words it.
absl::StatusOr<LegacyGraph> LayersGraph(const ModelConfig& config,
                                        const InputSpec& input);

// `wide_deep` (wide_deep_graph.cc): the deep part (each field's
// "embedding" rows pooled, concatenated with the dense features, through
// ReLU Dense layers "deep/dense_<l>" to "deep/logit") plus the wide part
// (every id's "linear" row and "wide/kernel", "wide/bias" on the dense
// features), their logits added. InvalidArgument naming the
// model.wide_deep field for a bad setting, or for data without dense
// features.
absl::Status ValidateWideDeepConfig(const ModelConfig& config);
absl::StatusOr<LegacyGraph> WideDeepGraph(const ModelConfig& config,
                                          const InputSpec& input);

}  // namespace psflow

#endif  // PSFLOW_MODEL_GRAPH_LEGACY_GRAPHS_H_
