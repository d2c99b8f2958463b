// The ONNX graphs BuildOnnxModel writes, without a runtime: inputs,
// outputs, initializers, the tables' lookup, and the errors. Running the
// exports and comparing with psflow is //tests:onnx_export_test's job.
#include "model/onnx/onnx_export.h"

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ModelConfig ModelFromJson(const std::string& json) {
  ModelConfig config;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &config).ok())
      << json;
  return config;
}

// Values 0, 1, 2, ... for every variable; tables hold ids 9 and 5 (out of
// order, as servers hand them) with rows of 0.5s and 1.5s.
OnnxWeights FakeWeights() {
  OnnxWeights weights;
  weights.variable = [](const ModelVariable& v) {
    std::vector<float> values(v.num_elements());
    std::iota(values.begin(), values.end(), 0.0f);
    return absl::StatusOr<std::vector<float>>(values);
  };
  weights.table = [](const ModelTable& t) {
    OnnxWeights::Table table;
    table.ids = {5, 9};
    table.rows.assign(t.dim(), 1.5f);
    table.rows.resize(2 * t.dim(), 0.5f);
    return absl::StatusOr<OnnxWeights::Table>(table);
  };
  return weights;
}

OnnxExportSpec ImageSpec(const std::string& model) {
  OnnxExportSpec spec;
  spec.config = ModelFromJson(model);
  spec.input.example_shape = {4, 4};
  spec.input.num_classes = 3;
  spec.data_format = DataConfig::IDX;
  spec.name = "test";
  return spec;
}

std::vector<std::string> Names(
    const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& values) {
  std::vector<std::string> names;
  for (const onnx::ValueInfoProto& v : values) names.push_back(v.name());
  return names;
}

const onnx::TensorProto* Initializer(const onnx::ModelProto& model,
                                     const std::string& name) {
  for (const onnx::TensorProto& t : model.graph().initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

TEST(OnnxExportTest, AnMlpTakesRawPixelsAndKeepsTheCheckpointsNames) {
  OnnxExportSpec spec = ImageSpec(R"({"mlp": {"hidden_sizes": [5]}})");
  spec.metadata["job_name"] = "test";
  ASSERT_OK_AND_ASSIGN(onnx::ModelProto model,
                       BuildOnnxModel(spec, FakeWeights()));
  EXPECT_EQ(model.ir_version(), 8);
  ASSERT_EQ(model.opset_import_size(), 1);  // no tables: no ai.onnx.ml
  EXPECT_EQ(model.opset_import(0).version(), 13);
  EXPECT_THAT(Names(model.graph().input()), ElementsAre("pixels"));
  EXPECT_THAT(Names(model.graph().output()),
              ElementsAre("logits", "probabilities"));
  const auto& pixels = model.graph().input(0).type().tensor_type();
  EXPECT_EQ(pixels.elem_type(), onnx::TensorProto::FLOAT);
  ASSERT_EQ(pixels.shape().dim_size(), 3);
  EXPECT_EQ(pixels.shape().dim(0).dim_param(), "batch");
  EXPECT_EQ(pixels.shape().dim(1).dim_value(), 4);
  // The reader's 1/255 is the first node.
  EXPECT_EQ(model.graph().node(0).op_type(), "Mul");
  const onnx::TensorProto* kernel = Initializer(model, "dense_0/kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_THAT(kernel->dims(), ElementsAre(16, 5));  // [in, out]
  EXPECT_NE(Initializer(model, "dense_1/bias"), nullptr);
  EXPECT_EQ(model.graph().node(model.graph().node_size() - 1).op_type(),
            "Softmax");
  ASSERT_EQ(model.metadata_props_size(), 1);
  EXPECT_EQ(model.metadata_props(0).key(), "job_name");
}

TEST(OnnxExportTest, TheWideDeepKindTakesDenseColumnsAndIds) {
  OnnxExportSpec spec;
  spec.config = ModelFromJson(R"({"wide_deep": {"embedding_dim": 2,
                                                 "hidden_sizes": [4]}})");
  spec.input.example_shape = {3};
  spec.input.num_classes = 2;
  spec.input.num_fields = 2;
  spec.data_format = DataConfig::CRITEO;
  ASSERT_OK_AND_ASSIGN(onnx::ModelProto model,
                       BuildOnnxModel(spec, FakeWeights()));
  EXPECT_THAT(Names(model.graph().input()), ElementsAre("dense", "ids"));
  EXPECT_NE(Initializer(model, "embedding/values"), nullptr);
  EXPECT_NE(Initializer(model, "linear/values"), nullptr);
  EXPECT_NE(Initializer(model, "deep/dense_0/kernel"), nullptr);
  EXPECT_NE(Initializer(model, "deep/logit/kernel"), nullptr);
  EXPECT_NE(Initializer(model, "wide/kernel"), nullptr);
  EXPECT_NE(Initializer(model, "wide/bias"), nullptr);
  // The same model on images is not this checkpoint's.
  spec.data_format = DataConfig::IDX;
  EXPECT_THAT(BuildOnnxModel(spec, FakeWeights()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.wide_deep reads CRITEO rows")));
}

TEST(OnnxExportTest, TheWeightSourcesErrorsArePassedOn) {
  OnnxWeights weights = FakeWeights();
  weights.variable = [](const ModelVariable& v) {
    return absl::StatusOr<std::vector<float>>(absl::FailedPreconditionError(
        "no tensor " + v.name() + " in the checkpoint"));
  };
  EXPECT_THAT(BuildOnnxModel(ImageSpec(R"({"mlp": {}})"), weights),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no tensor dense_0/kernel")));
}

OnnxExportSpec CtrSpec(const std::string& features_name) {
  OnnxExportSpec spec;
  spec.config = ModelFromJson(R"({"graph": {
      "inputs": [{"name": ")" +
                              features_name +
                              R"(", "features": {}},
                 {"name": "c", "categorical": {"field": 1, "table": "t", "dim": 2}}],
      "nodes": [{"name": "joined", "inputs": [")" +
                              features_name + R"(", "c"],
                 "layer": {"Concatenate": {}}},
                {"name": "logit", "inputs": ["joined"],
                 "layer": {"Dense": {"units": 1}}}],
      "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}}})");
  spec.input.example_shape = {3};
  spec.input.num_classes = 2;
  spec.input.num_fields = 4;
  spec.data_format = DataConfig::CRITEO;
  return spec;
}

TEST(OnnxExportTest, ATableIsADenseMatrixInIdOrderWithADefaultRow) {
  ASSERT_OK_AND_ASSIGN(onnx::ModelProto model,
                       BuildOnnxModel(CtrSpec("dense"), FakeWeights()));
  EXPECT_THAT(Names(model.graph().input()), ElementsAre("dense", "ids"));
  const auto& ids = model.graph().input(1).type().tensor_type();
  EXPECT_EQ(ids.elem_type(), onnx::TensorProto::INT64);
  EXPECT_EQ(ids.shape().dim(1).dim_value(), 4);  // every field of the data
  EXPECT_EQ(ids.shape().dim(2).dim_param(), "bag");
  ASSERT_EQ(model.opset_import_size(), 2);
  EXPECT_EQ(model.opset_import(1).domain(), "ai.onnx.ml");
  // Rows sorted by id (5, then 9), then the default row of zeros.
  const onnx::TensorProto* values = Initializer(model, "t/values");
  ASSERT_NE(values, nullptr);
  EXPECT_THAT(values->dims(), ElementsAre(3, 2));
  std::vector<float> rows(6);
  ASSERT_EQ(values->raw_data().size(), rows.size() * sizeof(float));
  memcpy(rows.data(), values->raw_data().data(), values->raw_data().size());
  EXPECT_THAT(rows, ElementsAre(1.5f, 1.5f, 0.5f, 0.5f, 0.0f, 0.0f));
  bool found = false;
  for (const onnx::NodeProto& node : model.graph().node()) {
    if (node.op_type() != "LabelEncoder") continue;
    found = true;
    EXPECT_EQ(node.domain(), "ai.onnx.ml");
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.name() == "keys_int64s") {
        EXPECT_THAT(a.ints(), ElementsAre(-1, 5, 9));
      }
      if (a.name() == "values_int64s") {
        EXPECT_THAT(a.ints(), ElementsAre(2, 0, 1));
      }
      if (a.name() == "default_int64") {
        EXPECT_EQ(a.i(), 2);
      }
    }
  }
  EXPECT_TRUE(found);
  // One logit: its sigmoid is the probability.
  EXPECT_EQ(model.graph().node(model.graph().node_size() - 1).op_type(),
            "Sigmoid");
}

TEST(OnnxExportTest, AGraphInputNamedLikeTheModelsOwnInputsIsRefused) {
  EXPECT_THAT(BuildOnnxModel(CtrSpec("ids"), FakeWeights()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.graph input \"ids\"")));
}

TEST(OnnxExportTest, AModelForImagesIsRefusedOnCriteoData) {
  OnnxExportSpec spec = ImageSpec(R"({"mlp": {}})");
  spec.data_format = DataConfig::CRITEO;
  EXPECT_THAT(
      BuildOnnxModel(spec, FakeWeights()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reads images")));
}

}  // namespace
}  // namespace psflow
