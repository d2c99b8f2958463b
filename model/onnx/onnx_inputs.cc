#include "model/onnx/onnx_inputs.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/onnx/onnx_layers.h"

namespace psflow {
namespace {

// A categorical input of one table: its index in spec.inputs, its field and
// pooling.
struct TableUser {
  int input = 0;
  int field = 0;
  Pooling pooling = Pooling::kSum;
};

// Every categorical input of one table as its value: one lookup for all
// the fields they read, then each input's field of the pooled tensor.
absl::Status EmitTable(OnnxBuilder& b, const ModelTable& table,
                       const std::vector<TableUser>& users,
                       std::map<int, std::string>& values) {
  std::vector<int> fields;
  bool with_means = false;
  for (const TableUser& u : users) {
    fields.push_back(u.field);
    with_means = with_means || u.pooling == Pooling::kMean;
  }
  ASSIGN_OR_RETURN(PooledFields pooled,
                   EmitPooledFields(b, table, fields, with_means));
  for (size_t j = 0; j < users.size(); ++j) {
    const std::string which = b.Int64s(absl::StrCat(table.name(), ":user"), {},
                                       {static_cast<int64_t>(j)});
    values[users[j].input] =
        b.Op("Gather",
             {users[j].pooling == Pooling::kMean ? pooled.means : pooled.sums,
              which},
             absl::StrCat(table.name(), ":pooled"));
    b.SetInt("axis", 1);  // [batch, dim]
  }
  return absl::OkStatus();
}

}  // namespace

std::string EmitImageInput(OnnxBuilder& b, const std::string& name,
                           const Shape& data_shape, float scale,
                           const Shape& shape) {
  std::vector<int64_t> dims = {-1};
  dims.insert(dims.end(), data_shape.begin(), data_shape.end());
  b.Input(name, onnx::TensorProto::FLOAT, dims, {"batch"});
  std::string x = name;
  if (scale != 1.0f) {
    // The reader's byte * scale, in float32.
    x = b.Op("Mul", {x, b.Scalar(name + ":feature_scale", scale)},
             name + ":scaled");
  }
  if (shape != data_shape) x = EmitReshape(b, x, shape, name + ":reshaped");
  return x;
}

std::string EmitCtrDenseInput(OnnxBuilder& b, const std::string& name,
                              int64_t num_dense) {
  b.Input(name, onnx::TensorProto::INT64, {-1, num_dense}, {"batch"});
  // CtrDenseFeature: x <= 0 -> 0, else float(log1p(double(x))); in float64
  // so large counts lose nothing before the log.
  const std::string x = b.Op("Cast", {name}, name + ":float64");
  b.SetInt("to", onnx::TensorProto::DOUBLE);
  const std::string positive =
      b.Op("Max", {x, b.ScalarDouble(name + ":zero", 0.0)}, name + ":positive");
  const std::string plus_one =
      b.Op("Add", {positive, b.ScalarDouble(name + ":one", 1.0)},
           name + ":plus_one");
  const std::string logged = b.Op("Log", {plus_one}, name + ":log1p");
  const std::string y = b.Op("Cast", {logged}, name + ":transformed");
  b.SetInt("to", onnx::TensorProto::FLOAT);
  return y;
}

void DeclareIdsInput(OnnxBuilder& b, int num_fields) {
  b.Input(kOnnxIdsInput, onnx::TensorProto::INT64, {-1, num_fields, -1},
          {"batch", "", "bag"});
}

absl::StatusOr<PooledFields> EmitPooledFields(OnnxBuilder& b,
                                              const ModelTable& table,
                                              const std::vector<int>& fields,
                                              bool with_means) {
  const std::string& t = table.name();
  ASSIGN_OR_RETURN(OnnxWeights::Table rows, b.weights().table(table));
  const int64_t num_rows = static_cast<int64_t>(rows.ids.size());
  if (static_cast<int64_t>(rows.rows.size()) != num_rows * table.dim()) {
    return absl::InternalError(absl::StrCat("table ", t, ": ", rows.ids.size(),
                                            " ids but ", rows.rows.size(),
                                            " values of dim ", table.dim()));
  }
  // The matrix: the rows in id order, then the default row (zeros) that
  // every id the table never saw, and the -1 padding, read.
  std::vector<float> matrix = std::move(rows.rows);
  matrix.resize(matrix.size() + table.dim(), 0.0f);
  const std::string values_name =
      b.Floats(t + "/values", {num_rows + 1, table.dim()}, std::move(matrix));

  const std::vector<int64_t> field_numbers(fields.begin(), fields.end());
  const std::string field_list = b.Int64s(
      t + ":fields", {static_cast<int64_t>(fields.size())}, field_numbers);
  const std::string bags =
      b.Op("Gather", {kOnnxIdsInput, field_list}, t + ":bags");
  b.SetInt("axis", 1);  // [batch, fields, bag]

  // id -> row. The keys are the table's ids in ascending order (and -1,
  // the padding, so that the list is never empty); anything else is the
  // default row.
  std::vector<int64_t> keys = {-1};
  keys.insert(keys.end(), rows.ids.begin(), rows.ids.end());
  std::vector<int64_t> row_of_key = {num_rows};
  for (int64_t r = 0; r < num_rows; ++r) row_of_key.push_back(r);
  const std::string row_index =
      b.Op("LabelEncoder", {bags}, t + ":rows", "ai.onnx.ml");
  b.SetInts("keys_int64s", keys);
  b.SetInts("values_int64s", row_of_key);
  b.SetInt("default_int64", num_rows);
  const std::string looked_up =
      b.Op("Gather", {values_name, row_index}, t + ":looked_up");
  b.SetInt("axis", 0);  // [batch, fields, bag, dim]
  const std::string bag_axis = b.Int64s(t + ":axis2", {1}, {2});
  PooledFields pooled;
  pooled.sums = b.Op("ReduceSum", {looked_up, bag_axis}, t + ":sums");
  b.SetInt("keepdims", 0);  // [batch, fields, dim]
  if (!with_means) return pooled;

  // psflow multiplies a bag's sum by 1 / (its ids); an empty bag stays
  // zeros (its count is taken as 1).
  const std::string padding = b.Int64s(t + ":padding", {}, {-1});
  const std::string is_padding =
      b.Op("Equal", {bags, padding}, t + ":is_padding");
  const std::string present = b.Op("Not", {is_padding}, t + ":present");
  const std::string ones = b.Op("Cast", {present}, t + ":present_float");
  b.SetInt("to", onnx::TensorProto::FLOAT);
  const std::string counts = b.Op("ReduceSum", {ones, bag_axis}, t + ":counts");
  b.SetInt("keepdims", 1);  // [batch, fields, 1]
  const std::string at_least_one =
      b.Op("Max", {counts, b.Scalar(t + ":one", 1.0f)}, t + ":divisor");
  const std::string scale =
      b.Op("Reciprocal", {at_least_one}, t + ":mean_scale");
  pooled.means = b.Op("Mul", {pooled.sums, scale}, t + ":means");
  return pooled;
}

absl::StatusOr<std::map<int, std::string>> EmitCategoricalInputs(
    OnnxBuilder& b, const GraphSpec& spec, int num_fields) {
  std::map<int, std::string> values;
  std::vector<std::vector<TableUser>> users(spec.tables.size());
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const GraphInput& input = spec.inputs[i];
    if (input.kind != GraphInput::Kind::kCategorical) continue;
    users[input.table].push_back(
        {static_cast<int>(i), input.field, input.pooling});
  }
  if (std::all_of(users.begin(), users.end(),
                  [](const auto& u) { return u.empty(); })) {
    return values;
  }
  DeclareIdsInput(b, num_fields);
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    if (users[t].empty()) continue;
    ModelTable table;
    table.spec = spec.tables[t];
    RETURN_IF_ERROR(EmitTable(b, table, users[t], values));
  }
  return values;
}

}  // namespace psflow
