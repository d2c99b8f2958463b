#include "model/onnx/onnx_wide_deep.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/onnx/onnx_inputs.h"
#include "model/onnx/onnx_layers.h"

namespace psflow {
namespace {

// The definition's variable named `name`, or null.
const ModelVariable* Named(const ModelDefinition& definition,
                           const std::string& name) {
  for (const ModelVariable& v : definition.variables()) {
    if (v.name() == name) return &v;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::string> EmitWideDeep(OnnxBuilder& b,
                                         const ModelConfig& config,
                                         const InputSpec& input,
                                         const ModelDefinition& definition) {
  const int num_fields = input.num_fields;
  const int64_t num_dense = input.num_features();
  const std::vector<ModelTable>& tables = definition.tables();
  if (tables.size() != 2) {
    return absl::InternalError("wide_deep should read two tables");
  }
  const ModelTable& embedding = tables[0];
  const ModelTable& linear = tables[1];
  std::string dense;
  if (num_dense > 0) dense = EmitCtrDenseInput(b, "dense", num_dense);
  DeclareIdsInput(b, num_fields);
  std::vector<int> fields(num_fields);
  for (int f = 0; f < num_fields; ++f) fields[f] = f;

  // Deep: the fields' pooled embeddings, flattened field by field, then the
  // dense features.
  const bool mean = config.wide_deep().pooling() == "mean";
  ASSIGN_OR_RETURN(PooledFields pooled,
                   EmitPooledFields(b, embedding, fields, mean));
  std::string x =
      EmitReshape(b, mean ? pooled.means : pooled.sums,
                  {int64_t{num_fields} * embedding.dim()}, "deep:embeddings");
  if (!dense.empty()) {
    x = b.Op("Concat", {x, dense}, "deep:input");
    b.SetInt("axis", 1);
  }
  // deep/dense_<l> (ReLU), then deep/logit: kernel and bias pairs, in the
  // definition's order.
  const std::vector<ModelVariable>& variables = definition.variables();
  for (size_t v = 0; v + 1 < variables.size(); v += 2) {
    const std::string& name = variables[v].name();
    if (!absl::StartsWith(name, "deep/")) break;
    const std::string layer = name.substr(0, name.rfind('/'));
    ASSIGN_OR_RETURN(std::string kernel, b.Variable(variables[v]));
    ASSIGN_OR_RETURN(std::string bias, b.Variable(variables[v + 1]));
    const bool last = layer == "deep/logit";
    x = EmitDense(b, x, kernel, bias,
                  last ? Activation::kNone : Activation::kRelu, layer);
  }

  // Wide: every id's linear row summed over all fields, the dense features
  // times wide/kernel, wide/bias.
  ASSIGN_OR_RETURN(PooledFields wide_rows,
                   EmitPooledFields(b, linear, fields, false));
  const std::string fields_axis = b.Int64s("wide:axis1", {1}, {1});
  std::string wide = b.Op("ReduceSum", {wide_rows.sums, fields_axis},
                          "wide:ids");  // [batch, 1]
  b.SetInt("keepdims", 0);
  if (const ModelVariable* kernel = Named(definition, "wide/kernel")) {
    ASSIGN_OR_RETURN(std::string k, b.Variable(*kernel));
    const std::string features = b.Op("MatMul", {dense, k}, "wide:dense");
    wide = b.Op("Add", {wide, features}, "wide:sum");
  }
  const ModelVariable* bias = Named(definition, "wide/bias");
  if (bias == nullptr) return absl::InternalError("wide_deep has no wide/bias");
  ASSIGN_OR_RETURN(std::string wide_bias, b.Variable(*bias));
  wide = b.Op("Add", {wide, wide_bias}, "wide");
  return b.Op("Add", {x, wide}, "logit");
}

}  // namespace psflow
