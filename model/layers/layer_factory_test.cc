#include "model/layers/layer_factory.h"

#include <string>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The Keras multi-GPU guide's convnet, as configs/fashion_mnist_convnet.json
// writes it.
constexpr char kConvnet[] = R"({"layers": [
  {"Rescaling": {"scale": 0.00392156862745098}},
  {"Conv2D": {"filters": 12, "kernel_size": [3], "padding": "same",
              "use_bias": false}},
  {"BatchNormalization": {"scale": false, "center": true}},
  {"ReLU": {}},
  {"Conv2D": {"filters": 24, "kernel_size": [6, 6], "strides": [2],
              "padding": "valid", "use_bias": false}},
  {"BatchNormalization": {"scale": false, "center": true}},
  {"ReLU": {}},
  {"Conv2D": {"filters": 32, "kernel_size": [6], "strides": [2, 2],
              "padding": "same", "use_bias": true}},
  {"BatchNormalization": {"scale": false, "center": true}},
  {"ReLU": {}},
  {"GlobalAveragePooling2D": {}},
  {"Dense": {"units": 256, "activation": "relu"}},
  {"Dropout": {"rate": 0.5}},
  {"Dense": {"units": 10}}
]})";

ModelConfig Parse(const std::string& json) {
  ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status =
      google::protobuf::util::JsonStringToMessage(json, &config, options);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return config;
}

absl::StatusOr<std::vector<std::unique_ptr<Layer>>> Build(
    const std::string& layers_json, Shape example = {28, 28},
    int64_t classes = 10) {
  return BuildLayers(
      Parse(absl::StrCat(R"({"layers": )", layers_json, "}")).layers(), example,
      classes);
}

TEST(LayerFactoryTest, InfersTheKerasConvnetsShapesLayerByLayer) {
  ASSERT_OK_AND_ASSIGN(auto layers,
                       BuildLayers(Parse(kConvnet).layers(), {28, 28}, 10));
  std::vector<std::string> names, shapes;
  for (const auto& layer : layers) {
    names.push_back(layer->name());
    shapes.push_back(ShapeString(layer->output_shape()));
  }
  EXPECT_THAT(names, ElementsAre("rescaling", "conv2d", "batch_normalization",
                                 "re_lu", "conv2d_1", "batch_normalization_1",
                                 "re_lu_1", "conv2d_2", "batch_normalization_2",
                                 "re_lu_2", "global_average_pooling2d", "dense",
                                 "dropout", "dense_1"));
  EXPECT_THAT(shapes,
              ElementsAre("28x28x1", "28x28x12", "28x28x12", "28x28x12",
                          "12x12x24", "12x12x24", "12x12x24", "6x6x32",
                          "6x6x32", "6x6x32", "32", "256", "256", "10"));
}

TEST(LayerFactoryTest, ReshapeInfersItsMissingDimension) {
  ASSERT_OK_AND_ASSIGN(auto layers, Build(R"([
    {"Reshape": {"target_shape": [-1, 4]}},
    {"Flatten": {}},
    {"Dense": {"units": 10}}
  ])"));
  EXPECT_EQ(layers[0]->output_shape(), (Shape{196, 4}));
  EXPECT_EQ(layers[0]->name(), "reshape");
  EXPECT_THAT(Build(R"([{"Reshape": {"target_shape": [5, -1]}},
                        {"Dense": {"units": 10}}])")
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.layers[0] (Reshape): cannot reshape "
                                 "784 values into 5x-1")));
  EXPECT_THAT(Build(R"([{"Reshape": {"target_shape": [-1, -1]}}])").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("at most one -1")));
}

TEST(LayerFactoryTest, VariablesCarryKerasNamesShapesAndUpdateRules) {
  ASSERT_OK_AND_ASSIGN(auto layers,
                       BuildLayers(Parse(kConvnet).layers(), {28, 28}, 10));
  std::vector<std::string> names;
  for (const auto& layer : layers) {
    for (const ModelVariable& v : layer->variables()) {
      names.push_back(absl::StrCat(v.name(), " ", ShapeString(v.shape()),
                                   v.trainable() ? "" : " moving"));
    }
  }
  EXPECT_THAT(
      names,
      ElementsAre("conv2d/kernel 3x3x1x12", "batch_normalization/beta 12",
                  "batch_normalization/moving_mean 12 moving",
                  "batch_normalization/moving_variance 12 moving",
                  "conv2d_1/kernel 6x6x12x24", "batch_normalization_1/beta 24",
                  "batch_normalization_1/moving_mean 24 moving",
                  "batch_normalization_1/moving_variance 24 moving",
                  "conv2d_2/kernel 6x6x24x32", "conv2d_2/bias 32",
                  "batch_normalization_2/beta 32",
                  "batch_normalization_2/moving_mean 32 moving",
                  "batch_normalization_2/moving_variance 32 moving",
                  "dense/kernel 32x256", "dense/bias 256",
                  "dense_1/kernel 256x10", "dense_1/bias 10"));
  const ModelVariable& moving = layers[2]->variables()[1];
  EXPECT_EQ(moving.variable.update, VariableUpdate::kMovingAverage);
  EXPECT_FLOAT_EQ(moving.variable.momentum, 0.99f);
  EXPECT_EQ(layers[2]->variables()[2].initializer, Initializer::kOnes);
}

TEST(LayerFactoryTest, PoolingFlattenAndExplicitNames) {
  ASSERT_OK_AND_ASSIGN(
      auto layers,
      Build(R"([{"Conv2D": {"filters": 4, "kernel_size": [5]}, "name": "c"},
                {"MaxPooling2D": {}},
                {"AveragePooling2D": {"pool_size": [3], "strides": [1],
                                      "padding": "same"}},
                {"Flatten": {}},
                {"Activation": {"activation": "tanh"}},
                {"Dense": {"units": 10, "use_bias": false}}])"));
  EXPECT_EQ(layers[0]->name(), "c");
  EXPECT_EQ(layers[0]->variables()[0].name(), "c/kernel");
  EXPECT_EQ(ShapeString(layers[0]->output_shape()), "24x24x4");
  EXPECT_EQ(ShapeString(layers[1]->output_shape()), "12x12x4");
  EXPECT_EQ(ShapeString(layers[2]->output_shape()), "12x12x4");
  EXPECT_EQ(ShapeString(layers[3]->output_shape()), "576");
  EXPECT_EQ(layers[5]->variables().size(), 1u);  // no bias
}

// Every mistake names the layer's index and class, the problem and a fix.
TEST(LayerFactoryTest, ShapeMistakesNameTheLayerAndTheFix) {
  struct Case {
    std::string layers, want;
  };
  const Case cases[] = {
      {R"([{"Conv2D": {"filters": 4, "kernel_size": [3], "strides": [2]}},
           {"Conv2D": {"filters": 4, "kernel_size": [3], "strides": [2]}},
           {"Conv2D": {"filters": 4, "kernel_size": [7]}},
           {"Flatten": {}}, {"Dense": {"units": 10}}])",
       "model.layers[2] (Conv2D): its 7x7 window is larger than its 6x6 "
       "input"},
      {R"([{"Conv2D": {"filters": 4, "kernel_size": [3]}},
           {"Dense": {"units": 10}}])",
       "model.layers[1] (Dense): Dense takes a vector per example, its input "
       "is 26x26x4; put a Flatten or GlobalAveragePooling2D layer before it"},
      {R"([{"Flatten": {}}, {"Conv2D": {"filters": 4, "kernel_size": [3]}}])",
       "model.layers[1] (Conv2D): takes height x width x channels images, "
       "its input is 784"},
      {R"([{"Flatten": {}}, {"Dense": {"units": 7}}])",
       "model.layers[1] (Dense): the last layer outputs 7 per example; it "
       "must output the 10 class logits"},
      {R"([{"Conv2D": {"filters": 10, "kernel_size": [28]}}])",
       "after a Flatten or GlobalAveragePooling2D layer"},
      {R"([{"Flatten": {}}, {}, {"Dense": {"units": 10}}])",
       "model.layers[1] (?): names no layer class"},
      {R"([{"Flatten": {}}, {"Dense": {"units": 10, "activation": "softmax"}}])",
       "applied by the loss already"},
      {R"([{"Conv2D": {"filters": 4}}])", "kernel_size is missing"},
      {R"([{"Conv2D": {"filters": 4, "kernel_size": [3, 3, 3]}}])",
       "kernel_size has 3 values"},
      {R"([{"Conv2D": {"filters": 0, "kernel_size": [3]}}])",
       "filters is 0; it must be 1 to"},
      {R"([{"MaxPooling2D": {"padding": "full"}}])",
       "padding \"full\" is unknown; use \"valid\" or \"same\""},
      {R"([{"BatchNormalization": {"momentum": 1.0}}])",
       "momentum is 1; it must be in [0, 1)"},
      {R"([{"Dropout": {"rate": 1.0}}])", "rate is 1; it must be in [0, 1)"},
      {R"([{"Rescaling": {"offset": 1}}])", "scale is missing"},
      {R"([{"Activation": {"activation": "gelu"}}])",
       "activation \"gelu\" is unknown"},
      {R"([{"Flatten": {}, "name": "x"}, {"Dense": {"units": 10}, "name": "x"}])",
       "model.layers[1] (Dense): name \"x\" is already used by "
       "model.layers[0]"},
      {R"([{"Flatten": {}, "name": "a/b"}])", "name \"a/b\" must be"},
      {"[]", "model.layers is empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.layers);
    EXPECT_THAT(Build(c.layers), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr(c.want)));
  }
}

TEST(LayerFactoryTest, ArgumentChecksNeedNoShapes) {
  EXPECT_OK(ValidateLayerConfigs(Parse(kConvnet).layers()));
  EXPECT_THAT(ValidateLayerConfigs(
                  Parse(R"({"layers": [{"Dropout": {"rate": -1}}]})").layers()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model.layers[0] (Dropout)"),
                             HasSubstr("rate is -1"))));
}

TEST(LayerFactoryTest, AnUnknownLayerClassIsAParseError) {
  ModelConfig config;
  const auto status = google::protobuf::util::JsonStringToMessage(
      R"({"layers": [{"Conv3D": {}}]})", &config);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("Conv3D"));
}

}  // namespace
}  // namespace psflow
