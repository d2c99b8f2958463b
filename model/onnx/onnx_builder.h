// A small writer of ONNX graphs (onnx::GraphProto, Debian's ONNX 1.12
// messages): nodes, initializers and constants under names it keeps
// unique, and the model's variables loaded once each through the caller's
// weight source. What model/onnx's emitters (onnx_layers.h, onnx_nodes.h,
// onnx_inputs.h) write with; it knows no layer.
//
// Tensors flowing between nodes carry the batch as their first dimension;
// shapes handed in here are per example (model/layers/layer.h's Shape)
// unless a comment says otherwise.
//
// Not thread-safe; one builder per export.
#ifndef PSFLOW_MODEL_ONNX_ONNX_BUILDER_H_
#define PSFLOW_MODEL_ONNX_ONNX_BUILDER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model.h"
#include "onnx/onnx_pb.h"

namespace psflow {

// Where the exported values come from (a checkpoint, in psctl).
struct OnnxWeights {
  // The values of `variable` (its num_elements(), row-major in its shape);
  // an error names what is missing or wrong.
  std::function<absl::StatusOr<std::vector<float>>(const ModelVariable&)>
      variable;
  // A table's rows, in ascending id order: ids (distinct) and rows
  // (ids.size() x dim).
  struct Table {
    std::vector<int64_t> ids;
    std::vector<float> rows;
  };
  std::function<absl::StatusOr<Table>(const ModelTable&)> table;
};

class OnnxBuilder {
 public:
  // Writes into `graph`, which must outlive the builder.
  OnnxBuilder(onnx::GraphProto* graph, OnnxWeights weights)
      : graph_(graph), weights_(std::move(weights)) {}

  // `base` if no value is named so yet, else `base_1`, `base_2`, ...;
  // the name is reserved.
  std::string Unique(const std::string& base);

  // The model's variable as an initializer named as in the checkpoint
  // ("dense_0/kernel"), with its shape; loaded once, however often asked.
  // A name in `renames` (a translated kind's graph names, GraphOptions::
  // variable_names) is looked up and written under its new name.
  absl::StatusOr<std::string> Variable(const ModelVariable& variable);
  void RenameVariables(std::map<std::string, std::string> renames) {
    renames_ = std::move(renames);
  }

  // A float32 initializer of `dims` (absolute, not per example), named
  // `base` made unique.
  std::string Floats(const std::string& base, const std::vector<int64_t>& dims,
                     std::vector<float> values);
  std::string Scalar(const std::string& base, float value);
  std::string ScalarDouble(const std::string& base, double value);
  std::string Int64s(const std::string& base, const std::vector<int64_t>& dims,
                     const std::vector<int64_t>& values);

  // A node of `op` reading `inputs`, writing one output named `output`
  // made unique; returns the output's name. Attributes go on via the
  // Set* functions below, on last_node().
  std::string Op(const std::string& op, std::vector<std::string> inputs,
                 const std::string& output, const std::string& domain = "");
  onnx::NodeProto& last_node() { return *last_node_; }

  // Attributes of the last node.
  void SetInt(const std::string& name, int64_t value);
  void SetInts(const std::string& name, const std::vector<int64_t>& values);
  void SetFloat(const std::string& name, float value);

  // A graph input or output: `type` (onnx::TensorProto::FLOAT, INT64, ...)
  // of `dims`, where a negative entry is the symbolic dimension named by
  // the same index in `symbols` ("batch", "bag").
  void Input(const std::string& name, int type,
             const std::vector<int64_t>& dims,
             const std::vector<std::string>& symbols);
  void Output(const std::string& name, int type,
              const std::vector<int64_t>& dims,
              const std::vector<std::string>& symbols);

  // The weights' table source, for the embedding emitter.
  const OnnxWeights& weights() const { return weights_; }

 private:
  onnx::TensorProto* NewInitializer(const std::string& name, int type,
                                    const std::vector<int64_t>& dims);

  onnx::GraphProto* const graph_;
  const OnnxWeights weights_;
  std::map<std::string, std::string> renames_;
  std::set<std::string> names_;
  std::set<std::string> loaded_variables_;
  onnx::NodeProto* last_node_ = nullptr;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_ONNX_ONNX_BUILDER_H_
