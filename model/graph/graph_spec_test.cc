#include "model/graph/graph_spec.h"

#include <string>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "model/layers/layer_factory.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

GraphConfig Parse(const std::string& json) {
  GraphConfig graph;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &graph);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << json;
  return graph;
}

// Click-through-rate data: 13 dense columns, 3 categorical fields.
InputSpec Ctr() {
  InputSpec data;
  data.example_shape = {13};
  data.num_classes = 2;
  data.num_fields = 3;
  return data;
}

InputSpec Images() {
  InputSpec data;
  data.example_shape = {28, 28};
  data.num_classes = 10;
  return data;
}

// DLRM's shape: a bottom MLP on the dense features, its output's and the
// fields' embeddings' pairwise dot products, a top MLP to one logit.
constexpr char kDlrm[] = R"({
  "inputs": [
    {"name": "features", "features": {}},
    {"name": "C0", "categorical": {"field": 0, "table": "emb", "dim": 8}},
    {"name": "C1", "categorical": {"field": 1, "table": "emb", "dim": 8}},
    {"name": "C2", "categorical": {"field": 2, "dim": 8, "pooling": "mean"}}
  ],
  "tables": [{"name": "emb", "min_frequency": 2}],
  "nodes": [
    {"name": "logit", "inputs": ["top"], "layer": {"Dense": {"units": 1}}},
    {"name": "top", "inputs": ["joined"],
     "layer": {"Dense": {"units": 16, "activation": "relu"}}},
    {"name": "joined", "inputs": ["bottom", "interact"],
     "layer": {"Concatenate": {}}},
    {"name": "interact", "inputs": ["bottom", "C0", "C1", "C2"],
     "layer": {"DotInteraction": {}}},
    {"name": "bottom", "inputs": ["features"],
     "layer": {"Dense": {"units": 8, "activation": "relu"}}}
  ],
  "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
})";

TEST(GraphSpecTest, DlrmInfersEveryShapeInAnOrderThatRespectsTheEdges) {
  ASSERT_OK_AND_ASSIGN(GraphSpec spec, BuildGraphSpec(Parse(kDlrm), Ctr()));
  ASSERT_EQ(spec.inputs.size(), 4u);
  EXPECT_EQ(spec.inputs[0].shape, (Shape{13}));
  EXPECT_EQ(spec.inputs[3].pooling, Pooling::kMean);
  // Two tables: "emb" shared by C0 and C1 (with its settings), and C2's
  // own, named after the input.
  ASSERT_EQ(spec.tables.size(), 2u);
  EXPECT_EQ(spec.tables[0].name(), "emb");
  EXPECT_EQ(spec.tables[0].dim(), 8);
  EXPECT_EQ(spec.tables[0].min_frequency(), 2);
  EXPECT_EQ(spec.tables[1].name(), "C2");
  EXPECT_EQ(spec.inputs[1].table, 0);
  EXPECT_EQ(spec.inputs[2].table, 0);
  EXPECT_EQ(spec.inputs[3].table, 1);
  std::vector<std::string> order;
  for (const GraphNode& node : spec.nodes) order.push_back(node.name);
  EXPECT_THAT(order,
              ElementsAre("bottom", "interact", "joined", "top", "logit"));
  EXPECT_EQ(spec.nodes[1].fields, 4);
  EXPECT_EQ(spec.nodes[1].output, (Shape{6}));   // 4 * 3 / 2
  EXPECT_EQ(spec.nodes[2].output, (Shape{14}));  // 8 + 6
  EXPECT_EQ(spec.shape(spec.output), (Shape{1}));
  EXPECT_EQ(spec.name(spec.output), "logit");
  EXPECT_THAT(spec.nodes[2].inputs, ElementsAre(4, 5));  // bottom, interact
  std::vector<std::string> variables;
  for (const ModelVariable& v : spec.Variables()) variables.push_back(v.name());
  EXPECT_THAT(variables,
              ElementsAre("bottom/kernel", "bottom/bias", "top/kernel",
                          "top/bias", "logit/kernel", "logit/bias"));
  EXPECT_THAT(
      spec.Describe(),
      HasSubstr("interact (DotInteraction) <- bottom, C0, C1, C2 -> 6"));
}

TEST(GraphSpecTest, CrossFactorizationMachineAndElementwiseLayers) {
  ASSERT_OK_AND_ASSIGN(GraphSpec spec, BuildGraphSpec(Parse(R"({
    "inputs": [
      {"name": "features", "features": {}},
      {"name": "C0", "categorical": {"field": 0, "dim": 4}},
      {"name": "C1", "categorical": {"field": 1, "dim": 4}}
    ],
    "nodes": [
      {"name": "x0", "inputs": ["features"], "layer": {"Dense": {"units": 4}}},
      {"name": "cross", "inputs": ["x0"], "layer": {"Cross": {}}},
      {"name": "cross_low", "inputs": ["x0", "cross"],
       "layer": {"Cross": {"projection_dim": 2, "use_bias": false}}},
      {"name": "fm", "inputs": ["C0", "C1"],
       "layer": {"FactorizationMachine": {}}},
      {"name": "stacked", "inputs": ["C0", "C1"],
       "layer": {"Concatenate": {}}},
      {"name": "fields", "inputs": ["stacked"],
       "layer": {"Reshape": {"target_shape": [-1, 4]}}},
      {"name": "fm2", "inputs": ["fields"], "layer": {"FactorizationMachine": {}}},
      {"name": "sum", "inputs": ["cross_low", "C0"], "layer": {"Add": {}}},
      {"name": "product", "inputs": ["sum", "C1"], "layer": {"Multiply": {}}},
      {"name": "deep", "inputs": ["product"], "layer": {"Dense": {"units": 1}}},
      {"name": "logit", "inputs": ["deep", "fm", "fm2"], "layer": {"Add": {}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })"),
                                                      Ctr()));
  auto node = [&](const std::string& name) -> const GraphNode& {
    for (const GraphNode& n : spec.nodes) {
      if (n.name == name) return n;
    }
    ADD_FAILURE() << name;
    return spec.nodes[0];
  };
  EXPECT_EQ(node("cross").output, (Shape{4}));
  ASSERT_EQ(node("cross").variables.size(), 2u);
  EXPECT_EQ(node("cross").variables[0].shape(), (Shape{4, 4}));
  ASSERT_EQ(node("cross_low").variables.size(), 2u);  // no bias
  EXPECT_EQ(node("cross_low").variables[0].name(), "cross_low/kernel_u");
  EXPECT_EQ(node("cross_low").variables[0].shape(), (Shape{4, 2}));
  EXPECT_EQ(node("cross_low").variables[1].shape(), (Shape{2, 4}));
  EXPECT_EQ(node("fm").output, (Shape{1}));
  EXPECT_EQ(node("fields").output, (Shape{2, 4}));
  EXPECT_EQ(node("fm2").fields, 2);
  EXPECT_EQ(node("fm2").width, 4);
  EXPECT_EQ(node("product").output, (Shape{4}));
}

TEST(GraphSpecTest, ImageGraphsReadTheImageWithAChannel) {
  ASSERT_OK_AND_ASSIGN(GraphSpec spec, BuildGraphSpec(Parse(R"({
    "inputs": [{"name": "image", "features": {}}],
    "nodes": [
      {"name": "scaled", "inputs": ["image"],
       "layer": {"Rescaling": {"scale": 0.00392156862745098}}},
      {"name": "conv", "inputs": ["scaled"],
       "layer": {"Conv2D": {"filters": 4, "kernel_size": [3]}}},
      {"name": "flat", "inputs": ["conv"], "layer": {"Flatten": {}}},
      {"name": "logits", "inputs": ["flat"], "layer": {"Dense": {"units": 10}}}
    ],
    "output": {"node": "logits", "loss": "SOFTMAX_CROSS_ENTROPY"}
  })"),
                                                      Images()));
  EXPECT_EQ(spec.inputs[0].shape, (Shape{28, 28, 1}));
  EXPECT_EQ(spec.nodes[1].output, (Shape{26, 26, 4}));
  EXPECT_EQ(spec.nodes[2].output, (Shape{2704}));
}

// Each mistake: its error names where and what.
struct Mistake {
  const char* what;
  std::string json;
  std::vector<std::string> message;
};

std::string Dlrm(const std::string& from, const std::string& to) {
  std::string json = kDlrm;
  const size_t at = json.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return json.replace(at, from.size(), to);
}

class GraphMistakeTest : public ::testing::TestWithParam<Mistake> {};

TEST_P(GraphMistakeTest, IsRefusedWithAClearError) {
  absl::StatusOr<GraphSpec> spec =
      BuildGraphSpec(Parse(GetParam().json), Ctr());
  ASSERT_THAT(spec.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  for (const std::string& part : GetParam().message) {
    EXPECT_THAT(spec.status().message(), HasSubstr(part));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, GraphMistakeTest,
    ::testing::Values(
        Mistake{"UnknownInput",
                Dlrm(R"("inputs": ["joined"])", R"("inputs": ["joinde"])"),
                {"model.graph.nodes[1] \"top\" (Dense)", "reads \"joinde\"",
                 "neither an input nor a node"}},
        Mistake{"Cycle",
                Dlrm(R"("inputs": ["features"],
     "layer": {"Dense": {"units": 8)",
                     R"("inputs": ["top"],
     "layer": {"Dense": {"units": 8)"),
                {"cycle", "reads"}},
        Mistake{"ReadsItself",
                Dlrm(R"("inputs": ["joined"])", R"("inputs": ["top"])"),
                {"\"top\"", "reads itself"}},
        Mistake{"UnusedNode",
                Dlrm(R"("nodes": [)",
                     R"("nodes": [{"name": "spare", "inputs": ["bottom"],
                       "layer": {"Dense": {"units": 3}}},)"),
                {"nodes[0] \"spare\"", "does not depend on it"}},
        Mistake{"UnusedInput",
                Dlrm(R"("inputs": [
    {"name": "features")",
                     R"("inputs": [
    {"name": "C9", "categorical": {"field": 2, "dim": 8}},
    {"name": "features")"),
                {"inputs[0] \"C9\"", "does not depend on it"}},
        Mistake{"ConcatenateAxis",
                Dlrm(R"("Concatenate": {})", R"("Concatenate": {"axis": -2})"),
                {"\"joined\" (Concatenate)",
                 "axis -2 is outside inputs of rank 1"}},
        Mistake{"AddOfDifferentShapes",
                Dlrm(R"("Concatenate": {})", R"("Add": {})"),
                {"\"joined\" (Add)", "inputs of one shape", "8, 6"}},
        Mistake{"ATableWithTwoDims",
                Dlrm(R"("table": "emb", "dim": 8}},
    {"name": "C1")",
                     R"("table": "emb", "dim": 4}},
    {"name": "C1")"),
                {"inputs[2] \"C1\"", "table \"emb\" is read with dim 8",
                 "dim 4 by model.graph.inputs[1] \"C0\""}},
        Mistake{"TableSettingsOfAnotherDim",
                Dlrm(R"({"name": "emb", "min_frequency": 2})",
                     R"({"name": "emb", "dim": 16})"),
                {"tables[0] \"emb\"", "dim 16 differs from 8"}},
        Mistake{"TableSettingsNobodyReads",
                Dlrm(R"({"name": "emb", "min_frequency": 2})",
                     R"({"name": "emb"}, {"name": "other"})"),
                {"tables[1] \"other\"", "no input reads this table"}},
        Mistake{"InteractionOfDifferentWidths",
                Dlrm(R"({"units": 8, "activation": "relu"})",
                     R"({"units": 5, "activation": "relu"})"),
                {"\"interact\" (DotInteraction)", "inputs of one width",
                 "5, 8, 8, 8"}},
        Mistake{
            "SoftmaxOnOneLogit",
            Dlrm("SIGMOID_CROSS_ENTROPY", "SOFTMAX_CROSS_ENTROPY"),
            {"model.graph.output \"logit\" (1)", "needs the 2 class logits"}},
        Mistake{"NoLoss",
                Dlrm(R"(, "loss": "SIGMOID_CROSS_ENTROPY")", ""),
                {"loss is missing"}},
        Mistake{"OutputIsAnInput",
                Dlrm(R"("node": "logit")", R"("node": "C0")"),
                {"is an input; the output must be a node"}},
        Mistake{
            "DuplicateName",
            Dlrm(R"({"name": "top", "inputs")", R"({"name": "C0", "inputs")"),
            {"name \"C0\" is taken by model.graph.inputs[1]"}},
        Mistake{"FieldOutOfRange",
                Dlrm(R"("field": 2)", R"("field": 3)"),
                {"inputs[3] \"C2\"", "field 3 is not among the data's 3"}},
        Mistake{"NoLayer",
                Dlrm(R"("layer": {"Concatenate": {}})", R"("layer": {})"),
                {"\"joined\"", "names no layer class"}},
        Mistake{"CrossOfFourInputs",
                Dlrm(R"("layer": {"DotInteraction": {}})",
                     R"("layer": {"Cross": {}})"),
                {"\"interact\" (Cross)", "reads x0 and x", "has 4 inputs"}},
        Mistake{
            "LowRankCrossAsWideAsItsInput",
            Dlrm(R"("layer": {"Dense": {"units": 16, "activation": "relu"}})",
                 R"("layer": {"Cross": {"projection_dim": 14}})"),
            {"\"top\" (Cross)", "projection_dim 14 must be 0"}}),
    [](const ::testing::TestParamInfo<Mistake>& info) {
      return info.param.what;
    });

TEST(GraphSpecTest, AFullRankCrossOnAHugeInputIsRefused) {
  absl::StatusOr<GraphSpec> spec = BuildGraphSpec(Parse(R"({
    "inputs": [{"name": "x", "features": {}}],
    "nodes": [
      {"name": "wide", "inputs": ["x"], "layer": {"Dense": {"units": 100000}}},
      {"name": "cross", "inputs": ["wide"], "layer": {"Cross": {}}},
      {"name": "logit", "inputs": ["cross"], "layer": {"Dense": {"units": 1}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })"),
                                                  Ctr());
  EXPECT_THAT(spec.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"cross\" (Cross): its kernel would hold "
                                 "10000000000 values")));
}

TEST(GraphSpecTest, CategoricalInputsNeedCategoricalData) {
  absl::StatusOr<GraphSpec> spec = BuildGraphSpec(Parse(kDlrm), Images());
  EXPECT_THAT(spec.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the data has no categorical fields")));
}

TEST(GraphSpecTest, SequentialModelsRefuseLayersOfSeveralInputs) {
  LayerConfigs layers;
  layers.Add()->mutable_concatenate();
  EXPECT_THAT(ValidateLayerConfigs(layers),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("Concatenate reads several inputs: it "
                                 "belongs in a model.graph")));
}

}  // namespace
}  // namespace psflow
