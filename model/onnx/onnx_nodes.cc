#include "model/onnx/onnx_nodes.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/onnx/onnx_layers.h"

namespace psflow {
namespace {

// Several inputs combined pairwise, left to right (x0 op x1, then op x2,
// ...), as psflow's Add and Multiply kernels accumulate.
std::string Fold(OnnxBuilder& b, const char* op, const GraphNode& node,
                 const std::vector<std::string>& inputs) {
  std::string y = inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) {
    y = b.Op(op, {y, inputs[i]},
             i + 1 == inputs.size() ? node.name
                                    : absl::StrCat(node.name, ":partial"));
  }
  return y;
}

// The F fields of width d as one [batch, F, d] tensor: the one [F, d]
// input itself, or the [d] inputs stacked.
std::string Stack(OnnxBuilder& b, const GraphNode& node,
                  const std::vector<std::string>& inputs) {
  if (inputs.size() == 1) return inputs[0];
  const std::string axis = b.Int64s(node.name + ":axis1", {1}, {1});
  std::vector<std::string> expanded;
  for (const std::string& x : inputs) {
    expanded.push_back(
        b.Op("Unsqueeze", {x, axis}, absl::StrCat(node.name, ":field")));
  }
  const std::string stacked = b.Op("Concat", expanded, node.name + ":fields");
  b.SetInt("axis", 1);
  return stacked;
}

// Z = X X^T per example, then Z's upper triangle row by row (from the
// diagonal with self_interaction), as psflow's DotInteraction.
std::string EmitDotInteraction(OnnxBuilder& b, const GraphNode& node,
                               const std::vector<std::string>& inputs) {
  const int64_t f = node.fields;
  const std::string x = Stack(b, node, inputs);
  const std::string xt = b.Op("Transpose", {x}, node.name + ":fields_t");
  b.SetInts("perm", {0, 2, 1});
  const std::string z = b.Op("MatMul", {x, xt}, node.name + ":products");
  const std::string flat = EmitReshape(b, z, {f * f}, node.name + ":flat");
  std::vector<int64_t> triangle;
  for (int64_t i = 0; i < f; ++i) {
    for (int64_t j = node.self_interaction ? i : i + 1; j < f; ++j) {
      triangle.push_back(i * f + j);
    }
  }
  const std::string indices =
      b.Int64s(node.name + ":triangle", {static_cast<int64_t>(triangle.size())},
               triangle);
  const std::string y = b.Op("Gather", {flat, indices}, node.name);
  b.SetInt("axis", 1);
  return y;
}

// 0.5 * sum_k S_k^2 - 0.5 * sum_fk x_fk^2 with S = sum_f x_f, the terms
// psflow's kernel forms. Output [batch, 1].
std::string EmitFactorizationMachine(OnnxBuilder& b, const GraphNode& node,
                                     const std::vector<std::string>& inputs) {
  const std::string& n = node.name;
  const std::string x = Stack(b, node, inputs);
  const std::string fields_axis = b.Int64s(n + ":axis1", {1}, {1});
  const std::string sums = b.Op("ReduceSum", {x, fields_axis}, n + ":sums");
  b.SetInt("keepdims", 0);
  const std::string squares = b.Op("Mul", {sums, sums}, n + ":sums_squared");
  const std::string square_sum =
      b.Op("ReduceSum", {squares, fields_axis}, n + ":sum_of_sums_squared");
  b.SetInt("keepdims", 1);
  const std::string x2 = b.Op("Mul", {x, x}, n + ":x_squared");
  const std::string flat =
      EmitReshape(b, x2, {node.fields * node.width}, n + ":x_squared_flat");
  const std::string x2_sum =
      b.Op("ReduceSum", {flat, fields_axis}, n + ":sum_of_x_squared");
  b.SetInt("keepdims", 1);
  const std::string half = b.Scalar(n + ":half", 0.5f);
  const std::string a = b.Op("Mul", {square_sum, half}, n + ":first");
  const std::string c = b.Op("Mul", {x2_sum, half}, n + ":second");
  return b.Op("Sub", {a, c}, n);
}

// DCN-v2: x0 * (x W + b) + x, W full rank or U V.
absl::StatusOr<std::string> EmitCross(OnnxBuilder& b, const GraphNode& node,
                                      const std::vector<std::string>& inputs) {
  const std::string& x0 = inputs[0];
  const std::string& x = inputs.back();
  std::string u;
  size_t next = 0;
  if (node.projection_dim == 0) {
    ASSIGN_OR_RETURN(std::string w, b.Variable(node.variables[next++]));
    u = b.Op("MatMul", {x, w}, node.name + ":xw");
  } else {
    ASSIGN_OR_RETURN(std::string kernel_u, b.Variable(node.variables[next++]));
    ASSIGN_OR_RETURN(std::string kernel_v, b.Variable(node.variables[next++]));
    const std::string low = b.Op("MatMul", {x, kernel_u}, node.name + ":xu");
    u = b.Op("MatMul", {low, kernel_v}, node.name + ":xw");
  }
  if (node.use_bias) {
    ASSIGN_OR_RETURN(std::string bias, b.Variable(node.variables[next++]));
    u = b.Op("Add", {u, bias}, node.name + ":xw_b");
  }
  const std::string gated = b.Op("Mul", {x0, u}, node.name + ":gated");
  return b.Op("Add", {gated, x}, node.name);
}

}  // namespace

absl::StatusOr<std::string> EmitGraphNode(
    OnnxBuilder& b, const GraphNode& node, const LayerConfig& layer,
    const std::vector<std::string>& inputs) {
  switch (node.kind) {
    case NodeKind::kLayer:
      return EmitLayer(b, layer, *node.layer, inputs[0], node.name);
    case NodeKind::kConcatenate: {
      const std::string y = b.Op("Concat", inputs, node.name);
      b.SetInt("axis", node.axis + 1);  // after the batch
      return y;
    }
    case NodeKind::kAdd:
      return Fold(b, "Add", node, inputs);
    case NodeKind::kMultiply:
      return Fold(b, "Mul", node, inputs);
    case NodeKind::kDotInteraction:
      return EmitDotInteraction(b, node, inputs);
    case NodeKind::kFactorizationMachine:
      return EmitFactorizationMachine(b, node, inputs);
    case NodeKind::kCross:
      return EmitCross(b, node, inputs);
  }
  return absl::UnimplementedError(
      absl::StrCat("psctl ckpt export --format=onnx: node ", node.name, " (",
                   node.layer_class, ") is not exportable yet"));
}

}  // namespace psflow
