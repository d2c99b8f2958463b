#include "model/graph/graph_batch.h"

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

absl::Status CheckSparse(const GraphSpec& spec, const InputSpec& input,
                         const ExampleBatch& batch, bool training) {
  const SparseBatch* sparse = batch.sparse;
  const int fields = input.num_fields;
  bool ok =
      sparse != nullptr && sparse->num_fields == fields &&
      static_cast<int64_t>(sparse->offsets.size()) == batch.size * fields + 1 &&
      sparse->slots.size() == sparse->ids.size() &&
      sparse->rows.size() == spec.tables.size() && sparse->offsets[0] == 0 &&
      sparse->offsets.back() == static_cast<int64_t>(sparse->ids.size());
  const bool per_table = sparse != nullptr && !sparse->table_slots.empty();
  ok = ok && (!per_table || (sparse->table_slots.size() == spec.tables.size() &&
                             sparse->table_rows.size() == spec.tables.size()));
  for (size_t t = 0; ok && t < spec.tables.size(); ++t) {
    const int64_t rows = per_table ? sparse->table_rows[t] : sparse->num_unique;
    ok = sparse->rows[t].size() ==
             static_cast<size_t>(rows) * spec.tables[t].dim() &&
         (!per_table || sparse->table_slots[t].size() == sparse->ids.size());
    for (size_t k = 0; ok && per_table && k < sparse->ids.size(); ++k) {
      ok = sparse->table_slots[t][k] < rows;
    }
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("the graph needs every batch's sparse features: ", fields,
                     " fields per example and the rows of its ",
                     spec.tables.size(), " tables"));
  }
  for (size_t k = 1; k < sparse->offsets.size(); ++k) {
    if (sparse->offsets[k] < sparse->offsets[k - 1]) {
      return absl::InvalidArgumentError("sparse offsets go backwards");
    }
  }
  if (training && !sparse->row_gradients.empty()) {  // empty: none wanted
    bool sized = sparse->row_gradients.size() == spec.tables.size();
    for (size_t t = 0; sized && t < spec.tables.size(); ++t) {
      sized = sparse->row_gradients[t].size() == sparse->rows[t].size();
    }
    if (!sized) {
      return absl::InvalidArgumentError(
          "a training batch needs a row gradient buffer per table (or none), "
          "the size of its rows");
    }
  }
  for (int32_t slot : sparse->slots) {
    if (slot < 0 || slot >= sparse->num_unique) {
      return absl::InvalidArgumentError(
          absl::StrCat("an id's slot ", slot, " is outside the ",
                       sparse->num_unique, " pulled rows"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckGraphBatch(const GraphSpec& spec, const InputSpec& input,
                             int64_t max_batch, const ExampleBatch& batch,
                             bool training) {
  const bool sigmoid = spec.loss == GraphConfig::Output::SIGMOID_CROSS_ENTROPY;
  const int64_t size = batch.size;
  if (size <= 0 || size > max_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch of ", size, " examples; this model takes 1 to ", max_batch));
  }
  if (static_cast<int64_t>(batch.features.size()) !=
          size * input.num_features() ||
      static_cast<int64_t>(batch.labels.size()) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", size, " examples has ", batch.features.size(),
                     " feature values and ", batch.labels.size(),
                     " labels; the graph "
                     "takes ",
                     input.num_features(), " features per example"));
  }
  for (int64_t i = 0; i < size; ++i) {
    const int32_t y = batch.labels[i];
    if (y < 0 || y >= input.num_classes || (sigmoid && y > 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "example ", i, " has label ", y, "; the model takes ",
          sigmoid ? "0 or 1" : absl::StrCat("0 to ", input.num_classes - 1)));
    }
  }
  return spec.tables.empty() ? absl::OkStatus()
                             : CheckSparse(spec, input, batch, training);
}

}  // namespace psflow
