#include "client/psctl/onnx_checkpoint_export.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "model/onnx/onnx_export.h"

namespace psflow {
namespace {

std::string ShapeOf(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<std::vector<float>> ReadVariable(const CheckpointReader& reader,
                                                const ModelVariable& v) {
  const CheckpointTensor* tensor = reader.Find(v.name());
  if (tensor == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        reader.path(), " has no tensor ", v.name(), " ", ShapeOf(v.shape()),
        ", which the model declares: the model config does not belong to "
        "this checkpoint (pass the job's own config with --job)"));
  }
  const std::vector<int64_t> shape(tensor->shape().begin(),
                                   tensor->shape().end());
  if (shape != v.shape()) {
    return absl::FailedPreconditionError(absl::StrCat(
        reader.path(), ": tensor ", v.name(), " is ", ShapeOf(shape),
        " but the model declares ", ShapeOf(v.shape()),
        ": the model config does not belong to this checkpoint (pass the "
        "job's own config with --job)"));
  }
  return reader.Read(*tensor);
}

absl::StatusOr<OnnxWeights::Table> ReadTable(const CheckpointReader& reader,
                                             const ModelTable& t) {
  const CheckpointTable* table = reader.FindTable(t.name());
  if (table == nullptr || table->dim() != t.dim()) {
    return absl::FailedPreconditionError(absl::StrCat(
        reader.path(), " has no embedding table ", t.name(), " of dim ",
        t.dim(), ", which the model reads",
        table == nullptr ? ""
                         : absl::StrCat(" (its dim is ", table->dim(), ")"),
        ": the model config does not belong to this checkpoint (pass the "
        "job's own config with --job)"));
  }
  // Rows come server by server; the export orders them by id.
  std::vector<int64_t> ids;
  std::vector<float> values;
  ids.reserve(table->num_rows());
  values.reserve(table->num_rows() * table->dim());
  RETURN_IF_ERROR(reader.ReadTable(
      *table, [&](const CheckpointReader::RowSegment& segment) {
        ids.insert(ids.end(), segment.ids.begin(), segment.ids.end());
        values.insert(values.end(), segment.values.begin(),
                      segment.values.end());
        return absl::OkStatus();
      }));
  std::vector<int64_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  OnnxWeights::Table sorted;
  sorted.ids.reserve(ids.size());
  sorted.rows.reserve(values.size());
  const int dim = table->dim();
  for (int64_t r : order) {
    if (!sorted.ids.empty() && sorted.ids.back() == ids[r]) {
      return absl::DataLossError(absl::StrCat(
          reader.path(), ": table ", t.name(), " holds id ", ids[r],
          " twice; the checkpoint is damaged (psctl ckpt verify)"));
    }
    sorted.ids.push_back(ids[r]);
    sorted.rows.insert(sorted.rows.end(), values.begin() + r * dim,
                       values.begin() + (r + 1) * dim);
  }
  return sorted;
}

}  // namespace

OnnxWeights CheckpointWeights(const CheckpointReader& reader) {
  OnnxWeights weights;
  weights.variable = [&reader](const ModelVariable& v) {
    return ReadVariable(reader, v);
  };
  weights.table = [&reader](const ModelTable& t) {
    return ReadTable(reader, t);
  };
  return weights;
}

absl::StatusOr<std::string> ExportOnnx(
    const CheckpointReader& reader, const CheckpointModelInfo& model,
    const std::map<std::string, std::string>& metadata,
    const std::string& out_path) {
  OnnxExportSpec spec;
  spec.config = model.config;
  spec.input = model.input;
  spec.data_format = model.data_format;
  spec.name = reader.index().job_name();
  spec.metadata = metadata;
  spec.metadata["global_step"] = absl::StrCat(reader.index().global_step());
  // What the model read, to find what the checkpoint holds beyond it.
  std::set<std::string> read_variables, read_tables;
  OnnxWeights weights = CheckpointWeights(reader);
  weights.variable = [&reader, &read_variables](const ModelVariable& v) {
    read_variables.insert(v.name());
    return ReadVariable(reader, v);
  };
  weights.table = [&reader, &read_tables](const ModelTable& t) {
    read_tables.insert(t.name());
    return ReadTable(reader, t);
  };
  ASSIGN_OR_RETURN(onnx::ModelProto onnx_model, BuildOnnxModel(spec, weights));
  // A checkpoint of a larger model (another layer the config lacks) would
  // otherwise export as a model that is not the trained one.
  std::vector<std::string> unused;
  for (const CheckpointTensor& tensor : reader.index().tensors()) {
    if (tensor.slot().empty() && !read_variables.count(tensor.name())) {
      unused.push_back(tensor.name());
    }
  }
  for (const CheckpointTable& table : reader.index().tables()) {
    if (!read_tables.count(table.name())) {
      unused.push_back(absl::StrCat("table ", table.name()));
    }
  }
  if (!unused.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        reader.path(), " holds ", absl::StrJoin(unused, ", "),
        ", which the model lacks: the model config does not belong to this "
        "checkpoint, and the export would not be the trained model (pass "
        "the job's own config with --job)"));
  }
  std::string bytes;
  if (!onnx_model.SerializeToString(&bytes)) {
    return absl::InternalError("the ONNX model did not serialize");
  }
  RETURN_IF_ERROR(WriteFileAtomically(out_path, bytes));
  std::vector<std::string> inputs, outputs;
  for (const onnx::ValueInfoProto& v : onnx_model.graph().input()) {
    inputs.push_back(v.name());
  }
  for (const onnx::ValueInfoProto& v : onnx_model.graph().output()) {
    outputs.push_back(v.name());
  }
  return absl::StrCat("inputs ", absl::StrJoin(inputs, ", "), "; outputs ",
                      absl::StrJoin(outputs, ", "), "; ",
                      onnx_model.graph().node_size(), " nodes, ",
                      bytes.size() >> 10, " KiB");
}

}  // namespace psflow
