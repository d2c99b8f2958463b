// `wide_deep` as a graph (the model of configs/ctr_wide_deep.json; the
// same graph written out is configs/ctr_wide_deep_graph.json):
//
//   C<f> = field f's ids in table "embedding" [dim], pooled (sum or mean)
//   W<f> = field f's ids in table "linear" [1], summed
//   deep:  C1..CF, dense -> Concatenate -> Dense h_0 relu "deep/dense_0"
//          -> ... -> Dense 1 "deep/logit"
//   wide:  W1..WF -> Add;  dense -> Dense 1 "wide/kernel" (zeros), "wide/bias"
//   logit = deep + wide ids + wide dense -> sigmoid cross-entropy
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/graph/legacy_graphs.h"
#include "model/layers/layer.h"

namespace psflow {
namespace {

// Inputs of the deep part beyond which a model is a configuration mistake.
constexpr int64_t kMaxDeepInput = int64_t{1} << 20;
constexpr char kEmbeddingTable[] = "embedding";
constexpr char kLinearTable[] = "linear";

absl::Status Invalid(absl::string_view field, int64_t value,
                     absl::string_view fix) {
  return absl::InvalidArgumentError(
      absl::StrCat("model.wide_deep.", field, " is ", value, "; ", fix));
}

int EmbeddingDim(const ModelConfig::WideDeep& w) {
  return w.embedding_dim() != 0 ? w.embedding_dim() : 16;
}

std::vector<int64_t> HiddenSizes(const ModelConfig::WideDeep& w) {
  if (w.hidden_sizes().empty()) return {256, 128};
  return {w.hidden_sizes().begin(), w.hidden_sizes().end()};
}

GraphConfig::Node* AddNode(GraphConfig& g, const std::string& name,
                           const std::vector<std::string>& inputs) {
  GraphConfig::Node* node = g.add_nodes();
  node->set_name(name);
  for (const std::string& in : inputs) node->add_inputs(in);
  return node;
}

void AddDense(GraphConfig& g, const std::string& name, const std::string& input,
              int64_t units, bool relu) {
  LayerConfig::Dense* dense =
      AddNode(g, name, {input})->mutable_layer()->mutable_dense();
  dense->set_units(units);
  if (relu) dense->set_activation("relu");
}

}  // namespace

absl::Status ValidateWideDeepConfig(const ModelConfig& config) {
  const ModelConfig::WideDeep& w = config.wide_deep();
  const std::string pooling = w.pooling();
  if (!pooling.empty() && pooling != "sum" && pooling != "mean") {
    return absl::InvalidArgumentError(
        absl::StrCat("model.wide_deep.pooling is \"", w.pooling(),
                     "\"; use \"sum\" or \"mean\""));
  }
  const int dim = EmbeddingDim(w);
  if (dim < 1 || dim > 4096) {
    return Invalid("embedding_dim", dim, "use 1 to 4096");
  }
  const std::vector<int64_t> hidden = HiddenSizes(w);
  for (size_t i = 0; i < hidden.size(); ++i) {
    if (hidden[i] <= 0 || hidden[i] > kMaxLayerWidth) {
      return Invalid(
          absl::StrCat("hidden_sizes[", i, "]"), hidden[i],
          absl::StrCat("a layer's width must be 1 to ", kMaxLayerWidth));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LegacyGraph> WideDeepGraph(const ModelConfig& config,
                                          const InputSpec& input) {
  if (absl::Status valid = ValidateWideDeepConfig(config); !valid.ok()) {
    return valid;
  }
  const ModelConfig::WideDeep& w = config.wide_deep();
  const int fields = input.num_fields;
  const int64_t dense = input.example_shape.empty() ? 0 : input.num_features();
  const int dim = EmbeddingDim(w);
  if (fields < 1) {
    return Invalid("num_fields", fields,
                   "a click-through-rate model needs at least one field "
                   "(data.format CRITEO)");
  }
  if (dense < 1) {
    // The wide part's bias lives in its Dense layer on the dense features.
    return Invalid("num_dense", dense,
                   "the model needs the data's integer columns "
                   "(data.num_dense 1 or more)");
  }
  if (int64_t{fields} * dim + dense > kMaxDeepInput) {
    return Invalid("num_fields x embedding_dim", int64_t{fields} * dim,
                   "the deep part's input is too wide");
  }
  const std::vector<int64_t> hidden = HiddenSizes(w);

  LegacyGraph out;
  out.input = input;
  out.input.num_classes = 2;  // clicks
  GraphConfig& g = out.graph;
  GraphConfig::Input* features = g.add_inputs();
  features->set_name("dense");
  features->mutable_features();
  // Embedding inputs first: the tables' order is their first use's.
  std::vector<std::string> deep_inputs, wide_inputs;
  for (const bool deep : {true, false}) {
    for (int f = 0; f < fields; ++f) {
      GraphConfig::Input* in = g.add_inputs();
      in->set_name(absl::StrCat(deep ? "C" : "W", f + 1));
      GraphConfig::Input::Categorical* c = in->mutable_categorical();
      c->set_field(f);
      c->set_table(deep ? kEmbeddingTable : kLinearTable);
      c->set_dim(deep ? dim : 1);
      c->set_pooling(deep && absl::AsciiStrToLower(w.pooling()) == "mean"
                         ? "mean"
                         : "sum");
      (deep ? deep_inputs : wide_inputs).push_back(in->name());
    }
  }
  deep_inputs.push_back("dense");
  EmbeddingTableSpec* embedding = g.add_tables();
  *embedding = w.embedding();
  embedding->set_name(kEmbeddingTable);
  embedding->set_dim(dim);
  EmbeddingTableSpec* linear = g.add_tables();
  *linear = w.linear();
  linear->set_name(kLinearTable);
  linear->set_dim(1);

  // Nodes in the order of the kind's variables: deep, then wide.
  AddNode(g, "deep_input", deep_inputs)->mutable_layer()->mutable_concatenate();
  std::string previous = "deep_input";
  std::vector<int64_t> widths = {int64_t{fields} * dim + dense};
  for (size_t l = 0; l < hidden.size(); ++l) {
    const std::string name = absl::StrCat("deep_", l);
    AddDense(g, name, previous, hidden[l], /*relu=*/true);
    out.options.variable_names[name + "/kernel"] =
        absl::StrCat("deep/dense_", l, "/kernel");
    out.options.variable_names[name + "/bias"] =
        absl::StrCat("deep/dense_", l, "/bias");
    widths.push_back(hidden[l]);
    previous = name;
  }
  AddDense(g, "deep_logit", previous, 1, /*relu=*/false);
  out.options.variable_names["deep_logit/kernel"] = "deep/logit/kernel";
  out.options.variable_names["deep_logit/bias"] = "deep/logit/bias";
  widths.push_back(1);
  AddDense(g, "wide_dense", "dense", 1, /*relu=*/false);
  out.options.variable_names["wide_dense/kernel"] = "wide/kernel";
  out.options.variable_names["wide_dense/bias"] = "wide/bias";
  out.options.initializers["wide_dense/kernel"] = Initializer::kZeros;
  std::string wide_ids = wide_inputs[0];
  if (wide_inputs.size() > 1) {
    AddNode(g, "wide_ids", wide_inputs)->mutable_layer()->mutable_add();
    wide_ids = "wide_ids";
  }
  AddNode(g, "logit", {"deep_logit", wide_ids, "wide_dense"})
      ->mutable_layer()
      ->mutable_add();
  g.mutable_output()->set_node("logit");
  g.mutable_output()->set_loss(GraphConfig::Output::SIGMOID_CROSS_ENTROPY);

  out.options.description = absl::StrCat(
      "wide_deep: ", fields, " fields x ", dim, " (",
      absl::AsciiStrToLower(w.pooling()) == "mean" ? "mean" : "sum",
      " pooling) + ", dense, " dense -> mlp ", absl::StrJoin(widths, "-"),
      " relu; wide linear");
  return out;
}

}  // namespace psflow
