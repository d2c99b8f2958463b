#include "model/onnx/onnx_layers.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layers/window_plan.h"

namespace psflow {
namespace {

// The config's activation name ("relu", ...); the factory has checked it.
absl::StatusOr<Activation> ActivationNamed(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower.empty() || lower == "linear") return Activation::kNone;
  if (lower == "relu") return Activation::kRelu;
  if (lower == "tanh") return Activation::kTanh;
  if (lower == "sigmoid") return Activation::kSigmoid;
  return absl::InvalidArgumentError(
      absl::StrCat("activation \"", name, "\" is not exportable"));
}

// A Keras pair argument ([h, w] or [k]), or `fallback` when absent (the
// factory's rules; it has checked the values).
std::pair<int64_t, int64_t> PairOr(
    const google::protobuf::RepeatedField<int64_t>& values,
    std::pair<int64_t, int64_t> fallback) {
  if (values.empty()) return fallback;
  return {values[0], values[values.size() - 1]};
}

Window2D WindowOf(const google::protobuf::RepeatedField<int64_t>& size,
                  std::pair<int64_t, int64_t> default_size,
                  const google::protobuf::RepeatedField<int64_t>& strides,
                  bool strides_default_to_size, const std::string& padding) {
  const auto k = PairOr(size, default_size);
  const auto s = PairOr(
      strides, strides_default_to_size ? k : std::pair<int64_t, int64_t>{1, 1});
  Window2D w;
  w.kh = k.first, w.kw = k.second, w.sh = s.first, w.sw = s.second;
  w.padding = absl::AsciiStrToLower(padding) == "same" ? Padding::kSame
                                                       : Padding::kValid;
  return w;
}

// ONNX's pads [top, left, bottom, right] for psflow's geometry: the odd
// row or column of "same" padding goes after the image, as TensorFlow's.
std::vector<int64_t> PadsOf(const WindowGeometry& g) {
  const int64_t bottom =
      std::max<int64_t>((g.oh - 1) * g.sh + g.kh - g.h, 0) - g.pad_top;
  const int64_t right =
      std::max<int64_t>((g.ow - 1) * g.sw + g.kw - g.w, 0) - g.pad_left;
  return {g.pad_top, g.pad_left, std::max<int64_t>(bottom, 0),
          std::max<int64_t>(right, 0)};
}

std::string ToNchw(OnnxBuilder& b, const std::string& x,
                   const std::string& prefix) {
  const std::string out = b.Op("Transpose", {x}, prefix + ":nchw");
  b.SetInts("perm", {0, 3, 1, 2});
  return out;
}

std::string ToNhwc(OnnxBuilder& b, const std::string& x,
                   const std::string& output) {
  const std::string out = b.Op("Transpose", {x}, output);
  b.SetInts("perm", {0, 2, 3, 1});
  return out;
}

// The layer's variable with `suffix` ("kernel", "moving_mean"), or null.
const ModelVariable* Find(const Layer& layer, const std::string& suffix) {
  for (const ModelVariable& v : layer.variables()) {
    if (v.name() == absl::StrCat(layer.name(), "/", suffix)) return &v;
  }
  return nullptr;
}

absl::StatusOr<std::string> EmitConv2D(OnnxBuilder& b,
                                       const LayerConfig::Conv2D& c,
                                       const Layer& layer, const std::string& x,
                                       const std::string& output) {
  const Window2D window =
      WindowOf(c.kernel_size(), {1, 1}, c.strides(), false, c.padding());
  ASSIGN_OR_RETURN(WindowGeometry g, PlanWindow(layer.input_shape(), window));
  ASSIGN_OR_RETURN(Activation act, ActivationNamed(c.activation()));
  const std::string prefix = layer.name();
  ASSIGN_OR_RETURN(std::string kernel, b.Variable(*Find(layer, "kernel")));
  // [kh, kw, in, out] -> ONNX's [out, in, kh, kw].
  const std::string oihw = b.Op("Transpose", {kernel}, prefix + ":kernel_oihw");
  b.SetInts("perm", {3, 2, 0, 1});
  std::vector<std::string> inputs = {ToNchw(b, x, prefix), oihw};
  if (const ModelVariable* bias = Find(layer, "bias")) {
    ASSIGN_OR_RETURN(std::string name, b.Variable(*bias));
    inputs.push_back(name);
  }
  std::string y = b.Op("Conv", inputs, prefix + ":conv");
  b.SetInts("kernel_shape", {g.kh, g.kw});
  b.SetInts("strides", {g.sh, g.sw});
  b.SetInts("pads", PadsOf(g));
  y = EmitActivation(b, act, y, prefix + ":activation");
  return ToNhwc(b, y, output);
}

absl::StatusOr<std::string> EmitPooling(OnnxBuilder& b, const char* op,
                                        const LayerConfig::Pooling2D& p,
                                        const Layer& layer,
                                        const std::string& x,
                                        const std::string& output) {
  const Window2D window =
      WindowOf(p.pool_size(), {2, 2}, p.strides(), true, p.padding());
  ASSIGN_OR_RETURN(WindowGeometry g, PlanWindow(layer.input_shape(), window));
  const std::string y =
      b.Op(op, {ToNchw(b, x, layer.name())}, layer.name() + ":pool");
  b.SetInts("kernel_shape", {g.kh, g.kw});
  b.SetInts("strides", {g.sh, g.sw});
  b.SetInts("pads", PadsOf(g));
  // AveragePool's default count_include_pad = 0 divides by the window's
  // part inside the image, as psflow's pooling does; MaxPool ignores pads.
  return ToNhwc(b, y, output);
}

// y = x * scale + shift per channel (the last axis), with scale = gamma /
// sqrt(moving_variance + epsilon) and shift = beta - moving_mean * scale:
// the order of psflow's BatchNormApply. Runtimes fold the per-channel
// constants.
absl::StatusOr<std::string> EmitBatchNorm(
    OnnxBuilder& b, const LayerConfig::BatchNormalization& c,
    const Layer& layer, const std::string& x, const std::string& output) {
  const std::string prefix = layer.name();
  const float epsilon = c.has_epsilon() ? c.epsilon() : 1e-3f;
  ASSIGN_OR_RETURN(std::string mean, b.Variable(*Find(layer, "moving_mean")));
  ASSIGN_OR_RETURN(std::string variance,
                   b.Variable(*Find(layer, "moving_variance")));
  const std::string shifted =
      b.Op("Add", {variance, b.Scalar(prefix + ":epsilon", epsilon)},
           prefix + ":var_eps");
  const std::string root = b.Op("Sqrt", {shifted}, prefix + ":std");
  std::string scale = b.Op("Reciprocal", {root}, prefix + ":inv_std");
  if (const ModelVariable* gamma = Find(layer, "gamma")) {
    ASSIGN_OR_RETURN(std::string g, b.Variable(*gamma));
    scale = b.Op("Mul", {g, scale}, prefix + ":scale");
  }
  std::string shift = b.Op("Mul", {mean, scale}, prefix + ":mean_scaled");
  shift = b.Op("Neg", {shift}, prefix + ":shift");
  if (const ModelVariable* beta = Find(layer, "beta")) {
    ASSIGN_OR_RETURN(std::string name, b.Variable(*beta));
    shift = b.Op("Add", {name, shift}, prefix + ":shift_beta");
  }
  const std::string scaled = b.Op("Mul", {x, scale}, prefix + ":scaled");
  return b.Op("Add", {scaled, shift}, output);
}

}  // namespace

std::string EmitActivation(OnnxBuilder& b, Activation activation,
                           const std::string& x, const std::string& output) {
  switch (activation) {
    case Activation::kRelu:
      return b.Op("Relu", {x}, output);
    case Activation::kTanh:
      return b.Op("Tanh", {x}, output);
    case Activation::kSigmoid:
      return b.Op("Sigmoid", {x}, output);
    case Activation::kNone:
      break;
  }
  return b.Op("Identity", {x}, output);
}

std::string EmitDense(OnnxBuilder& b, const std::string& x,
                      const std::string& kernel, const std::string& bias,
                      Activation activation, const std::string& output) {
  const std::string linear = activation == Activation::kNone
                                 ? output
                                 : absl::StrCat(output, ":linear");
  std::string y = bias.empty() ? b.Op("MatMul", {x, kernel}, linear)
                               : b.Op("Gemm", {x, kernel, bias}, linear);
  if (activation == Activation::kNone) return y;
  return EmitActivation(b, activation, y, output);
}

std::string EmitReshape(OnnxBuilder& b, const std::string& x,
                        const Shape& shape, const std::string& output) {
  std::vector<int64_t> target = {-1};
  target.insert(target.end(), shape.begin(), shape.end());
  const std::string dims = b.Int64s(
      output + ":shape", {static_cast<int64_t>(target.size())}, target);
  return b.Op("Reshape", {x, dims}, output);
}

absl::StatusOr<std::string> EmitLayer(OnnxBuilder& b, const LayerConfig& config,
                                      const Layer& layer, const std::string& x,
                                      const std::string& output) {
  switch (config.kind_case()) {
    case LayerConfig::kDense: {
      ASSIGN_OR_RETURN(Activation act,
                       ActivationNamed(config.dense().activation()));
      ASSIGN_OR_RETURN(std::string kernel, b.Variable(*Find(layer, "kernel")));
      std::string bias;
      if (const ModelVariable* v = Find(layer, "bias")) {
        ASSIGN_OR_RETURN(bias, b.Variable(*v));
      }
      return EmitDense(b, x, kernel, bias, act, output);
    }
    case LayerConfig::kConv2D:
      return EmitConv2D(b, config.conv2d(), layer, x, output);
    case LayerConfig::kBatchNormalization:
      return EmitBatchNorm(b, config.batch_normalization(), layer, x, output);
    case LayerConfig::kActivation: {
      ASSIGN_OR_RETURN(Activation act,
                       ActivationNamed(config.activation().activation()));
      return EmitActivation(b, act, x, output);
    }
    case LayerConfig::kRelu:
      return EmitActivation(b, Activation::kRelu, x, output);
    case LayerConfig::kMaxPooling2D:
      return EmitPooling(b, "MaxPool", config.max_pooling2d(), layer, x,
                         output);
    case LayerConfig::kAveragePooling2D:
      return EmitPooling(b, "AveragePool", config.average_pooling2d(), layer, x,
                         output);
    case LayerConfig::kGlobalAveragePooling2D: {
      const std::string y = b.Op("ReduceMean", {x}, output);
      b.SetInts("axes", {1, 2});
      b.SetInt("keepdims", 0);
      return y;
    }
    case LayerConfig::kFlatten:
    case LayerConfig::kReshape:
      return EmitReshape(b, x, layer.output_shape(), output);
    case LayerConfig::kRescaling: {
      const auto& r = config.rescaling();
      std::string y = b.Op(
          "Mul",
          {x, b.Scalar(layer.name() + ":scale", static_cast<float>(r.scale()))},
          r.offset() == 0 ? output : layer.name() + ":scaled");
      if (r.offset() == 0) return y;
      return b.Op("Add",
                  {y, b.Scalar(layer.name() + ":offset",
                               static_cast<float>(r.offset()))},
                  output);
    }
    case LayerConfig::kDropout:
      // Inference: dropout is the identity.
      return b.Op("Identity", {x}, output);
    default:
      break;
  }
  return absl::UnimplementedError(
      absl::StrCat("psctl ckpt export --format=onnx: layer ", layer.name(),
                   " (", layer.Describe(), ") is not exportable yet"));
}

}  // namespace psflow
