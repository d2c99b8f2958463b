#include "model/registry.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

const InputSpec kImages{{28, 28}, 10};

TEST(RegistryTest, MlpConfigDefinesItsLayers) {
  ModelConfig config;
  config.mutable_mlp()->add_hidden_sizes(256);
  ASSERT_OK_AND_ASSIGN(auto definition, DefineModel(config, kImages));
  EXPECT_EQ(definition->Describe(), "mlp 784-256-10 relu");
  ASSERT_EQ(definition->variables().size(), 4u);
  EXPECT_EQ(definition->variables()[0].name(), "dense_0/kernel");
  EXPECT_EQ(definition->variables()[0].shape(),
            (std::vector<int64_t>{784, 256}));
  EXPECT_EQ(definition->input().num_features(), 784);
}

TEST(RegistryTest, SoftmaxRegressionHasOneDenseLayer) {
  ModelConfig config;
  config.mutable_softmax_regression();
  ASSERT_OK_AND_ASSIGN(auto definition, DefineModel(config, kImages));
  EXPECT_EQ(definition->Describe(), "softmax regression 784-10");
  EXPECT_EQ(definition->variables().size(), 2u);
}

TEST(RegistryTest, WideDeepTakesItsFieldsFromTheData) {
  ModelConfig config;
  config.mutable_wide_deep()->set_embedding_dim(8);
  config.mutable_wide_deep()->add_hidden_sizes(32);
  config.mutable_wide_deep()->mutable_linear()->mutable_optimizer()->set_kind(
      OptimizerConfig::FTRL);
  InputSpec ctr{{13}, 2};
  ctr.num_fields = 26;
  ASSERT_OK_AND_ASSIGN(auto definition, DefineModel(config, ctr));
  EXPECT_TRUE(definition->binary());
  ASSERT_EQ(definition->tables().size(), 2u);
  EXPECT_EQ(definition->tables()[0].dim(), 8);
  EXPECT_EQ(definition->tables()[1].spec.optimizer().kind(),
            OptimizerConfig::FTRL);
  EXPECT_EQ(definition->variables()[0].shape(),
            (std::vector<int64_t>{26 * 8 + 13, 32}));
  config.mutable_wide_deep()->set_pooling("max");
  EXPECT_THAT(ValidateModelConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("use \"sum\" or \"mean\"")));
}

ModelConfig LayersConfig() {
  ModelConfig config;
  config.add_layers()->mutable_flatten();
  config.add_layers()->mutable_dense()->set_units(10);
  return config;
}

TEST(RegistryTest, LayersDefineALayerModelThatScalesItsOwnInput) {
  ASSERT_OK_AND_ASSIGN(auto definition, DefineModel(LayersConfig(), kImages));
  EXPECT_EQ(definition->Describe(),
            "layers 28x28 -> 2 layers -> 10 classes, 7850 trainable "
            "parameters");
  EXPECT_EQ(definition->variables()[0].name(), "dense/kernel");
  EXPECT_EQ(definition->feature_scale(), 1.0f);
  ModelConfig mlp;
  mlp.mutable_mlp();
  EXPECT_EQ((*DefineModel(mlp, kImages))->feature_scale(), 1.0f / 255);
}

TEST(RegistryTest, LayersAndAnotherKindTogetherAreRefused) {
  ModelConfig config = LayersConfig();
  config.mutable_softmax_regression();
  EXPECT_THAT(ValidateModelConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sets both \"layers\"")));
}

TEST(RegistryTest, BadLayerArgumentsAreRejectedBeforeTheDataIsKnown) {
  ModelConfig config = LayersConfig();
  config.mutable_layers(1)->mutable_dense()->set_units(0);
  EXPECT_THAT(ValidateModelConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.layers[1] (Dense): units is 0")));
}

TEST(RegistryTest, AMissingKindSaysWhatToSet) {
  EXPECT_THAT(ValidateModelConfig(ModelConfig()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model is missing")));
  EXPECT_THAT(DefineModel(ModelConfig(), kImages),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RegistryTest, BadLayerSizesAreRejectedBeforeTheDataIsKnown) {
  ModelConfig config;
  config.mutable_mlp()->add_hidden_sizes(128);
  config.mutable_mlp()->add_hidden_sizes(-3);
  EXPECT_THAT(ValidateModelConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.mlp.hidden_sizes[1] is -3")));
  // Too wide: named in the config's own terms, with the limit.
  ModelConfig mlp;
  mlp.mutable_mlp()->add_hidden_sizes(2147483647);
  EXPECT_THAT(ValidateModelConfig(mlp),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.mlp.hidden_sizes[0] is 2147483647; a "
                                 "layer's width must be 1 to 1048576")));
  ModelConfig wide_deep;
  wide_deep.mutable_wide_deep()->add_hidden_sizes(2147483647);
  EXPECT_THAT(ValidateModelConfig(wide_deep),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a layer's width must be 1 to 1048576")));
}

TEST(RegistryTest, DataTheModelCannotTakeIsRejected) {
  ModelConfig config;
  config.mutable_softmax_regression();
  EXPECT_THAT(
      DefineModel(config, InputSpec{{28, 28}, 1}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 classes")));
  EXPECT_THAT(DefineModel(config, InputSpec{{28, 0}, 10}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input shape is [28, 0]")));
}

}  // namespace
}  // namespace psflow
