#include "model/layers/layer_factory.h"

#include <cmath>
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layers/layers.h"

namespace psflow {
namespace {

// Arguments above these are mistakes, and keep every size product far from
// overflowing int64.
constexpr int64_t kMaxWidth = kMaxLayerWidth;  // units, filters
constexpr int64_t kMaxWindow = 4096;           // kernel, stride
constexpr int64_t kMaxValuesPerExample = int64_t{1} << 28;
constexpr int64_t kMaxVariableElements = int64_t{1} << 31;

struct ClassInfo {
  const char* keras_class;   // as in the JSON
  const char* default_name;  // Keras' snake case
};

ClassInfo InfoOf(LayerConfig::KindCase kind) {
  switch (kind) {
    case LayerConfig::kRescaling:
      return {"Rescaling", "rescaling"};
    case LayerConfig::kDense:
      return {"Dense", "dense"};
    case LayerConfig::kConv2D:
      return {"Conv2D", "conv2d"};
    case LayerConfig::kBatchNormalization:
      return {"BatchNormalization", "batch_normalization"};
    case LayerConfig::kActivation:
      return {"Activation", "activation"};
    case LayerConfig::kRelu:
      return {"ReLU", "re_lu"};
    case LayerConfig::kMaxPooling2D:
      return {"MaxPooling2D", "max_pooling2d"};
    case LayerConfig::kAveragePooling2D:
      return {"AveragePooling2D", "average_pooling2d"};
    case LayerConfig::kGlobalAveragePooling2D:
      return {"GlobalAveragePooling2D", "global_average_pooling2d"};
    case LayerConfig::kFlatten:
      return {"Flatten", "flatten"};
    case LayerConfig::kDropout:
      return {"Dropout", "dropout"};
    case LayerConfig::kReshape:
      return {"Reshape", "reshape"};
    case LayerConfig::kConcatenate:
      return {"Concatenate", "concatenate"};
    case LayerConfig::kAdd:
      return {"Add", "add"};
    case LayerConfig::kMultiply:
      return {"Multiply", "multiply"};
    case LayerConfig::kDotInteraction:
      return {"DotInteraction", "dot_interaction"};
    case LayerConfig::kCross:
      return {"Cross", "cross"};
    case LayerConfig::kFactorizationMachine:
      return {"FactorizationMachine", "factorization_machine"};
    case LayerConfig::KIND_NOT_SET:
      break;
  }
  return {"?", "?"};
}

// "model.layers[3] (Conv2D)".
std::string Where(int index, const LayerConfig& config) {
  return absl::StrCat("model.layers[", index, "] (",
                      InfoOf(config.kind_case()).keras_class, ")");
}

absl::Status Error(int index, const LayerConfig& config,
                   const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(Where(index, config), ": ", problem));
}

absl::StatusOr<Activation> ActivationOf(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower.empty() || lower == "linear") return Activation::kNone;
  if (lower == "relu") return Activation::kRelu;
  if (lower == "tanh") return Activation::kTanh;
  if (lower == "sigmoid") return Activation::kSigmoid;
  if (lower == "softmax") {
    return absl::InvalidArgumentError(
        "activation \"softmax\" is applied by the loss already; leave the "
        "last layer linear (its outputs are the logits)");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("activation \"", name,
                   "\" is unknown; use \"linear\", \"relu\", \"tanh\" or "
                   "\"sigmoid\""));
}

absl::StatusOr<Padding> PaddingOf(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower.empty() || lower == "valid") return Padding::kValid;
  if (lower == "same") return Padding::kSame;
  return absl::InvalidArgumentError(absl::StrCat(
      "padding \"", name, "\" is unknown; use \"valid\" or \"same\""));
}

// A Keras pair argument ([h, w] or [k]); `fallback` when absent.
absl::StatusOr<std::pair<int64_t, int64_t>> PairOf(
    const char* field, const google::protobuf::RepeatedField<int64_t>& values,
    std::pair<int64_t, int64_t> fallback, bool required) {
  if (values.empty()) {
    if (required) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " is missing; give it as [3, 3] or [3]"));
    }
    return fallback;
  }
  if (values.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " has ", values.size(),
                     " values; give [height, width] or one value for both"));
  }
  const int64_t h = values[0], w = values[values.size() - 1];
  for (int64_t v : {h, w}) {
    if (v < 1 || v > kMaxWindow) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " ", v, " is out of range; it must be 1 to ", kMaxWindow));
    }
  }
  return std::pair{h, w};
}

absl::StatusOr<Window2D> WindowOf(
    const char* size_field,
    const google::protobuf::RepeatedField<int64_t>& size,
    std::pair<int64_t, int64_t> default_size, bool size_required,
    const google::protobuf::RepeatedField<int64_t>& strides,
    bool strides_default_to_size, const std::string& padding) {
  Window2D window;
  ASSIGN_OR_RETURN(auto k,
                   PairOf(size_field, size, default_size, size_required));
  ASSIGN_OR_RETURN(
      auto s,
      PairOf("strides", strides,
             strides_default_to_size ? k : std::pair<int64_t, int64_t>{1, 1},
             false));
  ASSIGN_OR_RETURN(window.padding, PaddingOf(padding));
  window.kh = k.first, window.kw = k.second;
  window.sh = s.first, window.sw = s.second;
  return window;
}

absl::Status PositiveWidth(const char* field, int64_t value) {
  if (value < 1 || value > kMaxWidth) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", value, "; it must be 1 to ", kMaxWidth));
  }
  return absl::OkStatus();
}

// Keras' Reshape: `target` with at most one -1, inferred from the
// input's size.
absl::StatusOr<Shape> ReshapeTarget(
    const google::protobuf::RepeatedField<int64_t>& target,
    const Shape* input) {
  if (target.empty()) {
    return absl::InvalidArgumentError(
        "target_shape is missing; e.g. [26, 16] (per example; one entry may "
        "be -1)");
  }
  int unknown = -1;
  int64_t known = 1;
  Shape shape(target.begin(), target.end());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && unknown < 0) {
      unknown = static_cast<int>(i);
    } else if (shape[i] < 1 || shape[i] > kMaxValuesPerExample) {
      return absl::InvalidArgumentError(
          absl::StrCat("target_shape ", ShapeString(shape),
                       " must hold positive sizes and at most one -1"));
    } else {
      known *= shape[i];
      if (known > kMaxValuesPerExample) {
        return absl::InvalidArgumentError(
            absl::StrCat("target_shape ", ShapeString(shape), " is too big"));
      }
    }
  }
  if (input == nullptr) return shape;
  const int64_t size = NumElements(*input);
  if (unknown >= 0) {
    if (size % known != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot reshape ", size, " values into ", ShapeString(shape)));
    }
    shape[unknown] = size / known;
  } else if (known != size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot reshape ", ShapeString(*input), " (", size, " values) into ",
        ShapeString(shape), " (", known, " values)"));
  }
  return shape;
}

// Checks one layer's arguments; with `input`, also builds it.
absl::StatusOr<std::unique_ptr<Layer>> Build(const LayerConfig& c,
                                             const std::string& name,
                                             const Shape* input) {
  static const Shape kNone;
  const Shape& in = input != nullptr ? *input : kNone;
  switch (c.kind_case()) {
    case LayerConfig::kRescaling: {
      const auto& r = c.rescaling();
      if (!r.has_scale()) {
        return absl::InvalidArgumentError(
            "scale is missing; e.g. 0.00392156862745098 (1/255) for pixel "
            "values");
      }
      if (!std::isfinite(r.scale()) || !std::isfinite(r.offset())) {
        return absl::InvalidArgumentError("scale and offset must be finite");
      }
      if (input == nullptr) return nullptr;
      return MakeRescaling(name, in, static_cast<float>(r.scale()),
                           static_cast<float>(r.offset()));
    }
    case LayerConfig::kDense: {
      const auto& d = c.dense();
      RETURN_IF_ERROR(PositiveWidth("units", d.units()));
      ASSIGN_OR_RETURN(Activation act, ActivationOf(d.activation()));
      if (input == nullptr) return nullptr;
      return MakeDense(name, in, d.units(), !d.has_use_bias() || d.use_bias(),
                       act);
    }
    case LayerConfig::kConv2D: {
      const auto& d = c.conv2d();
      RETURN_IF_ERROR(PositiveWidth("filters", d.filters()));
      ASSIGN_OR_RETURN(Window2D window,
                       WindowOf("kernel_size", d.kernel_size(), {1, 1}, true,
                                d.strides(), false, d.padding()));
      ASSIGN_OR_RETURN(Activation act, ActivationOf(d.activation()));
      if (input == nullptr) return nullptr;
      return MakeConv2D(name, in, d.filters(), window,
                        !d.has_use_bias() || d.use_bias(), act);
    }
    case LayerConfig::kBatchNormalization: {
      const auto& b = c.batch_normalization();
      const float momentum = b.has_momentum() ? b.momentum() : 0.99f;
      const float epsilon = b.has_epsilon() ? b.epsilon() : 1e-3f;
      if (!(momentum >= 0 && momentum < 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("momentum is ", momentum,
                         "; it must be in [0, 1) (Keras' "
                         "default 0.99)"));
      }
      if (!(epsilon > 0 && std::isfinite(epsilon))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "epsilon is ", epsilon, "; it must be positive (default 0.001)"));
      }
      if (input == nullptr) return nullptr;
      return MakeBatchNormalization(name, in, momentum, epsilon,
                                    !b.has_center() || b.center(),
                                    !b.has_scale() || b.scale());
    }
    case LayerConfig::kActivation: {
      if (c.activation().activation().empty()) {
        return absl::InvalidArgumentError(
            "activation is missing; use \"relu\", \"tanh\" or \"sigmoid\"");
      }
      ASSIGN_OR_RETURN(Activation act,
                       ActivationOf(c.activation().activation()));
      if (input == nullptr) return nullptr;
      return MakeActivation(name, in, act);
    }
    case LayerConfig::kRelu:
      if (input == nullptr) return nullptr;
      return MakeActivation(name, in, Activation::kRelu);
    case LayerConfig::kMaxPooling2D:
    case LayerConfig::kAveragePooling2D: {
      const auto& p = c.kind_case() == LayerConfig::kMaxPooling2D
                          ? c.max_pooling2d()
                          : c.average_pooling2d();
      ASSIGN_OR_RETURN(Window2D window,
                       WindowOf("pool_size", p.pool_size(), {2, 2}, false,
                                p.strides(), true, p.padding()));
      if (input == nullptr) return nullptr;
      return MakePooling2D(name, in,
                           c.kind_case() == LayerConfig::kMaxPooling2D
                               ? PoolKind::kMax
                               : PoolKind::kAverage,
                           window);
    }
    case LayerConfig::kGlobalAveragePooling2D:
      if (input == nullptr) return nullptr;
      return MakeGlobalAveragePooling2D(name, in);
    case LayerConfig::kFlatten:
      if (input == nullptr) return nullptr;
      return MakeFlatten(name, in);
    case LayerConfig::kDropout: {
      const float rate = c.dropout().rate();
      if (!(rate >= 0 && rate < 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("rate is ", rate, "; it must be in [0, 1)"));
      }
      if (input == nullptr) return nullptr;
      return MakeDropout(name, in, rate);
    }
    case LayerConfig::kReshape: {
      ASSIGN_OR_RETURN(Shape target,
                       ReshapeTarget(c.reshape().target_shape(), input));
      if (input == nullptr) return nullptr;
      return MakeReshape(name, in, target);
    }
    case LayerConfig::kConcatenate:
    case LayerConfig::kAdd:
    case LayerConfig::kMultiply:
    case LayerConfig::kDotInteraction:
    case LayerConfig::kCross:
    case LayerConfig::kFactorizationMachine:
      return absl::InvalidArgumentError(absl::StrCat(
          InfoOf(c.kind_case()).keras_class,
          " reads several inputs: it belongs in a model.graph, whose nodes "
          "name their inputs (docs/models.md), not in model.layers"));
    case LayerConfig::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "names no layer class; write e.g. {\"Dense\": {\"units\": 10}}");
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char ch : name) {
    if (!absl::ascii_isalnum(ch) && ch != '_' && ch != '-' && ch != '.') {
      return false;
    }
  }
  return true;
}

// Keras' names: each class's first layer takes the bare snake-case name,
// later ones _1, _2, ...; explicit names must be unique too.
absl::StatusOr<std::vector<std::string>> Names(const LayerConfigs& layers) {
  std::vector<std::string> names;
  std::map<std::string, int> count, first_use;
  for (int i = 0; i < layers.size(); ++i) {
    const LayerConfig& c = layers[i];
    std::string name = c.name();
    if (!name.empty() && !ValidName(name)) {
      return Error(i, c,
                   absl::StrCat("name \"", name,
                                "\" must be 1 to 64 letters, digits, '_', "
                                "'-' or '.'"));
    }
    if (name.empty()) {
      const std::string base = InfoOf(c.kind_case()).default_name;
      const int n = count[base]++;
      name = n == 0 ? base : absl::StrCat(base, "_", n);
    }
    auto [it, inserted] = first_use.emplace(name, i);
    if (!inserted) {
      return Error(i, c,
                   absl::StrCat("name \"", name,
                                "\" is already used by "
                                "model.layers[",
                                it->second, "]; give each layer its own name"));
    }
    names.push_back(std::move(name));
  }
  return names;
}

// A built layer's output and variables within the limits.
absl::Status CheckBuiltLayer(const Layer& layer) {
  const Shape& out = layer.output_shape();
  for (int64_t d : out) {
    if (d < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("its output ", ShapeString(out), " is empty"));
    }
  }
  if (NumElements(out) > kMaxValuesPerExample) {
    return absl::InvalidArgumentError(
        absl::StrCat("its output ", ShapeString(out), " has over ",
                     kMaxValuesPerExample, " values per example"));
  }
  for (const ModelVariable& v : layer.variables()) {
    if (v.num_elements() > kMaxVariableElements) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable ", v.name(), " (", ShapeString(v.shape()),
                       ") has over ", kMaxVariableElements, " values"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string LayerClassName(const LayerConfig& config) {
  return InfoOf(config.kind_case()).keras_class;
}

bool ReadsSeveralInputs(const LayerConfig& config) {
  switch (config.kind_case()) {
    case LayerConfig::kConcatenate:
    case LayerConfig::kAdd:
    case LayerConfig::kMultiply:
    case LayerConfig::kDotInteraction:
    case LayerConfig::kCross:
    case LayerConfig::kFactorizationMachine:
      return true;
    default:
      return false;
  }
}

bool ValidLayerName(const std::string& name) { return ValidName(name); }

absl::StatusOr<std::unique_ptr<Layer>> BuildLayer(const LayerConfig& config,
                                                  const std::string& name,
                                                  const Shape& input) {
  ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer, Build(config, name, &input));
  RETURN_IF_ERROR(CheckBuiltLayer(*layer));
  return layer;
}

absl::Status ValidateLayerConfigs(const LayerConfigs& layers) {
  for (int i = 0; i < layers.size(); ++i) {
    absl::StatusOr<std::unique_ptr<Layer>> checked =
        Build(layers[i], "", nullptr);
    if (!checked.ok()) {
      return Error(i, layers[i], std::string(checked.status().message()));
    }
  }
  return Names(layers).status();
}

absl::StatusOr<std::vector<std::unique_ptr<Layer>>> BuildLayers(
    const LayerConfigs& layers, const Shape& example_shape,
    int64_t num_classes) {
  RETURN_IF_ERROR(ValidateLayerConfigs(layers));
  if (layers.empty()) {
    return absl::InvalidArgumentError(
        "model.layers is empty; list the layers, ending with a Dense layer "
        "of one unit per class");
  }
  ASSIGN_OR_RETURN(std::vector<std::string> names, Names(layers));
  Shape shape = example_shape;
  if (shape.size() == 2) shape.push_back(1);  // one channel
  std::vector<std::unique_ptr<Layer>> built;
  for (int i = 0; i < layers.size(); ++i) {
    absl::StatusOr<std::unique_ptr<Layer>> layer =
        Build(layers[i], names[i], &shape);
    if (!layer.ok()) {
      return Error(i, layers[i],
                   absl::StrCat(layer.status().message(),
                                " (its input: ", ShapeString(shape), ")"));
    }
    if (absl::Status checked = CheckBuiltLayer(**layer); !checked.ok()) {
      return Error(i, layers[i], std::string(checked.message()));
    }
    shape = (*layer)->output_shape();
    built.push_back(*std::move(layer));
  }
  if (shape != Shape{num_classes}) {
    const int last = layers.size() - 1;
    return Error(last, layers[last],
                 absl::StrCat("the last layer outputs ", ShapeString(shape),
                              " per example; it must output the ", num_classes,
                              " class logits: end with {\"Dense\": "
                              "{\"units\": ",
                              num_classes, "}}",
                              shape.size() > 1 ? " after a Flatten or "
                                                 "GlobalAveragePooling2D layer"
                                               : ""));
  }
  return built;
}

}  // namespace psflow
