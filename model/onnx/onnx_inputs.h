// An exported model's inputs and the preprocessing psflow's data readers
// apply before a batch reaches the model, moved into the ONNX graph so the
// exported model takes the data as it is stored:
//
//   images (IDX)   float32 [batch, h, w]: raw pixel values 0..255, times
//                  the model's feature scale (1/255 for the MLP kinds; 1
//                  for `layers` and graph models, which rescale in a
//                  Rescaling layer of their own).
//   CRITEO dense   int64 [batch, num_dense]: the raw integer columns
//                  (missing values as 0), through log(1 + max(x, 0)) in
//                  float64 then float32, as CtrDenseFeature
//                  (data/ctr_examples.h).
//   CRITEO ids     int64 [batch, num_fields, bag] named "ids": field f's
//                  bag of ids (CtrFeatureId values: the hashing stays
//                  outside the model, docs/models.md), padded with -1.
//                  Each table is a dense [rows + 1, dim] matrix in
//                  ascending id order plus ai.onnx.ml's LabelEncoder from
//                  id to row (its keys are the sorted ids); an id the table
//                  never saw, and the -1 padding, read the last row, zeros.
//                  Bags pool by sum or mean (over the ids present).
//
// Stateless functions.
#ifndef PSFLOW_MODEL_ONNX_ONNX_INPUTS_H_
#define PSFLOW_MODEL_ONNX_ONNX_INPUTS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/graph/graph_spec.h"
#include "model/layers/layer.h"
#include "model/onnx/onnx_builder.h"

namespace psflow {

// The graph input of categorical ids.
inline constexpr char kOnnxIdsInput[] = "ids";

// Declares image input `name` (float32 [batch] + `data_shape`), scales it
// by `scale` when that is not 1, and reshapes it to [batch] + `shape` (the
// model's view, e.g. [h, w, 1] for [h, w] images). Returns the value's name.
std::string EmitImageInput(OnnxBuilder& b, const std::string& name,
                           const Shape& data_shape, float scale,
                           const Shape& shape);

// Declares CRITEO dense input `name` (int64 [batch, num_dense]) and
// returns the transformed float32 value's name.
std::string EmitCtrDenseInput(OnnxBuilder& b, const std::string& name,
                              int64_t num_dense);

// Declares the "ids" input: int64 [batch, num_fields, bag].
void DeclareIdsInput(OnnxBuilder& b, int num_fields);

// `fields`' bags of "ids" looked up in `table` (its rows from the weight
// source) and pooled per example: [batch, fields.size(), dim] sums, and
// with `with_means` also the means (over the ids present).
struct PooledFields {
  std::string sums;
  std::string means;  // empty without with_means
};
absl::StatusOr<PooledFields> EmitPooledFields(OnnxBuilder& b,
                                              const ModelTable& table,
                                              const std::vector<int>& fields,
                                              bool with_means);

// Declares the "ids" input ([batch, num_fields, bag]) and emits every
// categorical input of `spec` (one lookup per table for all the fields it
// serves). Returns each categorical input's value name by its index in
// spec.inputs ([batch, dim]).
absl::StatusOr<std::map<int, std::string>> EmitCategoricalInputs(
    OnnxBuilder& b, const GraphSpec& spec, int num_fields);

}  // namespace psflow

#endif  // PSFLOW_MODEL_ONNX_ONNX_INPUTS_H_
