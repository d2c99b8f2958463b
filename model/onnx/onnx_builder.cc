#include "model/onnx/onnx_builder.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

// ONNX stores tensor bytes little-endian in raw_data, as x86-64 and arm64
// hold them in memory.
template <typename T>
std::string RawBytes(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

void SetType(onnx::ValueInfoProto& info, int type,
             const std::vector<int64_t>& dims,
             const std::vector<std::string>& symbols) {
  onnx::TypeProto::Tensor& tensor = *info.mutable_type()->mutable_tensor_type();
  tensor.set_elem_type(type);
  onnx::TensorShapeProto& shape = *tensor.mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    onnx::TensorShapeProto::Dimension& d = *shape.add_dim();
    if (dims[i] >= 0) {
      d.set_dim_value(dims[i]);
    } else {
      d.set_dim_param(i < symbols.size() ? symbols[i] : "unknown");
    }
  }
}

}  // namespace

std::string OnnxBuilder::Unique(const std::string& base) {
  std::string name = base;
  for (int k = 1; names_.count(name) > 0; ++k)
    name = absl::StrCat(base, "_", k);
  names_.insert(name);
  return name;
}

onnx::TensorProto* OnnxBuilder::NewInitializer(
    const std::string& name, int type, const std::vector<int64_t>& dims) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

absl::StatusOr<std::string> OnnxBuilder::Variable(
    const ModelVariable& graph_variable) {
  ModelVariable variable = graph_variable;
  if (auto it = renames_.find(variable.name()); it != renames_.end()) {
    variable.variable.name = it->second;
  }
  if (loaded_variables_.count(variable.name()) > 0) return variable.name();
  ASSIGN_OR_RETURN(std::vector<float> values, weights_.variable(variable));
  if (static_cast<int64_t>(values.size()) != variable.num_elements()) {
    return absl::InternalError(
        absl::StrCat("the weight source gave ", values.size(), " values for ",
                     variable.name(), ", which has ", variable.num_elements()));
  }
  if (names_.count(variable.name()) > 0) {
    return absl::InternalError(absl::StrCat(
        "variable ", variable.name(), " clashes with an ONNX value's name"));
  }
  names_.insert(variable.name());
  loaded_variables_.insert(variable.name());
  NewInitializer(variable.name(), onnx::TensorProto::FLOAT, variable.shape())
      ->set_raw_data(RawBytes(values));
  return variable.name();
}

std::string OnnxBuilder::Floats(const std::string& base,
                                const std::vector<int64_t>& dims,
                                std::vector<float> values) {
  const std::string name = Unique(base);
  NewInitializer(name, onnx::TensorProto::FLOAT, dims)
      ->set_raw_data(RawBytes(values));
  return name;
}

std::string OnnxBuilder::Scalar(const std::string& base, float value) {
  return Floats(base, {}, {value});
}

std::string OnnxBuilder::ScalarDouble(const std::string& base, double value) {
  const std::string name = Unique(base);
  NewInitializer(name, onnx::TensorProto::DOUBLE, {})
      ->set_raw_data(RawBytes(std::vector<double>{value}));
  return name;
}

std::string OnnxBuilder::Int64s(const std::string& base,
                                const std::vector<int64_t>& dims,
                                const std::vector<int64_t>& values) {
  const std::string name = Unique(base);
  NewInitializer(name, onnx::TensorProto::INT64, dims)
      ->set_raw_data(RawBytes(values));
  return name;
}

std::string OnnxBuilder::Op(const std::string& op,
                            std::vector<std::string> inputs,
                            const std::string& output,
                            const std::string& domain) {
  const std::string name = Unique(output);
  last_node_ = graph_->add_node();
  last_node_->set_op_type(op);
  if (!domain.empty()) last_node_->set_domain(domain);
  last_node_->set_name(name);
  for (std::string& input : inputs) last_node_->add_input(std::move(input));
  last_node_->add_output(name);
  return name;
}

void OnnxBuilder::SetInt(const std::string& name, int64_t value) {
  onnx::AttributeProto& a = *last_node_->add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
}

void OnnxBuilder::SetInts(const std::string& name,
                          const std::vector<int64_t>& values) {
  onnx::AttributeProto& a = *last_node_->add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a.add_ints(v);
}

void OnnxBuilder::SetFloat(const std::string& name, float value) {
  onnx::AttributeProto& a = *last_node_->add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
}

void OnnxBuilder::Input(const std::string& name, int type,
                        const std::vector<int64_t>& dims,
                        const std::vector<std::string>& symbols) {
  names_.insert(name);
  onnx::ValueInfoProto& info = *graph_->add_input();
  info.set_name(name);
  SetType(info, type, dims, symbols);
}

void OnnxBuilder::Output(const std::string& name, int type,
                         const std::vector<int64_t>& dims,
                         const std::vector<std::string>& symbols) {
  onnx::ValueInfoProto& info = *graph_->add_output();
  info.set_name(name);
  SetType(info, type, dims, symbols);
}

}  // namespace psflow
