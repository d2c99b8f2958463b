// The wide-and-deep model (the `wide_deep` kind, run as a graph:
// model/graph/wide_deep_graph.cc) on the CPU device: every gradient (dense
// variables and both tables' rows) against central finite differences of
// the mean log loss, sum and mean pooling, bags of zero, one and several
// ids, the kind's variables and tables, and bad batches refused with the
// reason.

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "model/registry.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

constexpr int kFields = 3;
constexpr int kDense = 2;
constexpr int kDim = 4;
constexpr int kBatch = 4;

enum class Pooling { kSum, kMean };

ModelConfig Config(Pooling pooling) {
  ModelConfig config;
  ModelConfig::WideDeep* w = config.mutable_wide_deep();
  w->set_embedding_dim(kDim);
  w->add_hidden_sizes(5);
  w->set_pooling(pooling == Pooling::kMean ? "mean" : "sum");
  return config;
}

absl::StatusOr<std::unique_ptr<ModelDefinition>> Define(
    const ModelConfig& config, int fields = kFields, int dense = kDense) {
  return DefineModel(config, InputSpec{{dense}, 2, fields});
}

// A batch with bags of 0 to 2 ids over 6 distinct ids, its rows, and the
// model's parameters, all random.
struct Fixture {
  explicit Fixture(const ModelDefinition& definition, uint32_t seed = 1) {
    std::mt19937 random(seed);
    std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
    for (const ModelVariable& v : definition.variables()) {
      std::vector<float> p(v.num_elements());
      for (float& x : p) x = uniform(random);
      params.push_back(std::move(p));
    }
    dense.resize(kBatch * kDense);
    for (float& x : dense) x = uniform(random) * 4;
    labels = {1, 0, 0, 1};
    // Bags: example 1 field 2 is empty, example 3 field 0 has 2 ids, and
    // id slot 0 appears in several examples.
    const std::vector<std::vector<int32_t>> bags = {
        {0}, {1}, {2}, {0}, {3}, {}, {4}, {0, 5}, {1}, {2, 3}, {5}, {0}};
    offsets.push_back(0);
    for (const auto& bag : bags) {
      for (int32_t s : bag) {
        slots.push_back(s);
        ids.push_back(1000 + s);
      }
      offsets.push_back(static_cast<int64_t>(slots.size()));
    }
    embedding.resize(6 * kDim);
    linear.resize(6);
    for (float& x : embedding) x = uniform(random);
    for (float& x : linear) x = uniform(random);
    embedding_grad.resize(embedding.size());
    linear_grad.resize(linear.size());
  }

  ExampleBatch Batch() {
    sparse.num_fields = kFields;
    sparse.offsets = offsets;
    sparse.ids = ids;
    sparse.slots = slots;
    sparse.num_unique = 6;
    sparse.rows = {embedding, linear};
    sparse.row_gradients = {absl::MakeSpan(embedding_grad),
                            absl::MakeSpan(linear_grad)};
    ExampleBatch batch;
    batch.size = kBatch;
    batch.features = dense;
    batch.labels = labels;
    batch.sparse = &sparse;
    return batch;
  }

  std::vector<absl::Span<const float>> Params() const {
    std::vector<absl::Span<const float>> out;
    for (const auto& p : params) out.push_back(p);
    return out;
  }

  std::vector<std::vector<float>> params;
  std::vector<float> dense;
  std::vector<int32_t> labels;
  std::vector<int64_t> offsets, ids;
  std::vector<int32_t> slots;
  std::vector<float> embedding, linear, embedding_grad, linear_grad;
  SparseBatch sparse;
};

class WideDeepTest : public ::testing::TestWithParam<Pooling> {};

// Mean loss of the batch with the fixture's current values.
double MeanLoss(Model& model, Fixture& f) {
  EXPECT_OK(model.LoadParameters(f.Params()));
  std::vector<float> p(kBatch);
  absl::StatusOr<BatchStats> stats = model.Score(f.Batch(), absl::MakeSpan(p));
  EXPECT_OK(stats);
  return stats->loss_sum / kBatch;
}

TEST_P(WideDeepTest, GradientsMatchFiniteDifferences) {
  ASSERT_OK_AND_ASSIGN(auto definition, Define(Config(GetParam())));
  std::unique_ptr<Device> device = CreateCpuDevice(1);
  ASSERT_OK_AND_ASSIGN(auto model, definition->Instantiate(device.get(), 8));
  Fixture f(*definition);
  std::vector<std::vector<float>> grads;
  std::vector<absl::Span<float>> grad_spans;
  for (const auto& p : f.params) grads.emplace_back(p.size());
  for (auto& g : grads) grad_spans.push_back(absl::MakeSpan(g));
  ASSERT_OK(model->LoadParameters(f.Params()));
  ASSERT_OK_AND_ASSIGN(BatchStats stats,
                       model->TrainStep(f.Batch(), grad_spans));
  EXPECT_EQ(stats.examples, kBatch);
  const std::vector<float> embedding_grad = f.embedding_grad;
  const std::vector<float> linear_grad = f.linear_grad;

  constexpr float kEps = 1e-2f;
  auto check = [&](float& value, float analytic, const std::string& what) {
    const float saved = value;
    value = saved + kEps;
    const double plus = MeanLoss(*model, f);
    value = saved - kEps;
    const double minus = MeanLoss(*model, f);
    value = saved;
    const double numeric = (plus - minus) / (2 * kEps);
    EXPECT_NEAR(analytic, numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << what;
  };
  for (size_t v = 0; v < f.params.size(); ++v) {
    for (size_t i = 0; i < f.params[v].size(); ++i) {
      check(f.params[v][i], grads[v][i],
            definition->variables()[v].name() + "[" + std::to_string(i) + "]");
    }
  }
  for (size_t i = 0; i < f.embedding.size(); ++i) {
    check(f.embedding[i], embedding_grad[i],
          "embedding row " + std::to_string(i / kDim));
  }
  for (size_t i = 0; i < f.linear.size(); ++i) {
    check(f.linear[i], linear_grad[i], "linear row " + std::to_string(i));
  }
  // Every id of the batch got a gradient.
  for (int u = 0; u < 6; ++u) EXPECT_NE(linear_grad[u], 0.0f) << u;
}

INSTANTIATE_TEST_SUITE_P(Pooling, WideDeepTest,
                         ::testing::Values(Pooling::kSum, Pooling::kMean));

TEST(WideDeepDefinitionTest, DeclaresItsVariablesAndTables) {
  ModelConfig defaults;
  defaults.mutable_wide_deep();
  ASSERT_OK_AND_ASSIGN(auto definition, Define(defaults, 26, 13));
  EXPECT_TRUE(definition->binary());
  EXPECT_EQ(definition->feature_scale(), 1.0f);
  ASSERT_EQ(definition->tables().size(), 2u);
  EXPECT_EQ(definition->tables()[0].name(), "embedding");
  EXPECT_EQ(definition->tables()[0].dim(), 16);
  EXPECT_EQ(definition->tables()[1].name(), "linear");
  EXPECT_EQ(definition->tables()[1].dim(), 1);
  EXPECT_TRUE(definition->tables()[0].fields.empty());  // every field
  EXPECT_TRUE(definition->tables()[1].fields.empty());
  // 26 x 16 + 13 inputs -> 256 -> 128 -> 1, then the wide part: the names,
  // shapes, order and initializers checkpoints of the kind hold.
  const std::vector<std::tuple<std::string, std::vector<int64_t>, Initializer>>
      expected = {
          {"deep/dense_0/kernel", {429, 256}, Initializer::kGlorotUniform},
          {"deep/dense_0/bias", {256}, Initializer::kZeros},
          {"deep/dense_1/kernel", {256, 128}, Initializer::kGlorotUniform},
          {"deep/dense_1/bias", {128}, Initializer::kZeros},
          {"deep/logit/kernel", {128, 1}, Initializer::kGlorotUniform},
          {"deep/logit/bias", {1}, Initializer::kZeros},
          {"wide/kernel", {13, 1}, Initializer::kZeros},
          {"wide/bias", {1}, Initializer::kZeros}};
  ASSERT_EQ(definition->variables().size(), expected.size());
  for (size_t v = 0; v < expected.size(); ++v) {
    const ModelVariable& variable = definition->variables()[v];
    EXPECT_EQ(variable.name(), std::get<0>(expected[v]));
    EXPECT_EQ(variable.shape(), std::get<1>(expected[v])) << variable.name();
    EXPECT_EQ(variable.initializer, std::get<2>(expected[v]))
        << variable.name();
    EXPECT_TRUE(variable.trainable()) << variable.name();
  }
  EXPECT_EQ(definition->Describe(),
            "wide_deep: 26 fields x 16 (sum pooling) + 13 dense -> mlp "
            "429-256-128-1 relu; wide linear");
  ModelConfig bad;
  bad.mutable_wide_deep()->set_embedding_dim(5000);
  EXPECT_THAT(DefineModel(bad, InputSpec{{13}, 2, 26}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.wide_deep.embedding_dim is 5000")));
  bad.mutable_wide_deep()->set_embedding_dim(0);
  bad.mutable_wide_deep()->set_pooling("max");
  EXPECT_THAT(ValidateModelConfig(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.wide_deep.pooling is \"max\"")));
}

TEST(WideDeepDefinitionTest, OneFieldAndNoDenseColumns) {
  // One field: its linear row goes straight into the logit's sum.
  ASSERT_OK_AND_ASSIGN(auto one, Define(Config(Pooling::kSum), 1, 1));
  EXPECT_EQ(one->variables().front().shape(),
            (std::vector<int64_t>{kDim + 1, 5}));
  // The wide part's bias sits in its Dense layer on the dense features.
  EXPECT_THAT(Define(Config(Pooling::kSum), kFields, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.wide_deep.num_dense is 0")));
}

TEST(WideDeepDefinitionTest, TheTablesKeepTheirSettings) {
  ModelConfig config = Config(Pooling::kSum);
  config.mutable_wide_deep()->mutable_linear()->mutable_optimizer()->set_kind(
      OptimizerConfig::FTRL);
  config.mutable_wide_deep()->mutable_embedding()->set_name("ignored");
  ASSERT_OK_AND_ASSIGN(auto definition, Define(config));
  EXPECT_EQ(definition->tables()[0].name(), "embedding");
  EXPECT_EQ(definition->tables()[0].dim(), kDim);
  EXPECT_EQ(definition->tables()[1].spec.optimizer().kind(),
            OptimizerConfig::FTRL);
}

TEST(WideDeepDefinitionTest, BadBatchesAreRefusedWithTheReason) {
  ASSERT_OK_AND_ASSIGN(auto definition, Define(Config(Pooling::kSum)));
  std::unique_ptr<Device> device = CreateCpuDevice(1);
  ASSERT_OK_AND_ASSIGN(auto model, definition->Instantiate(device.get(), 8));
  Fixture f(*definition);
  ASSERT_OK(model->LoadParameters(f.Params()));
  std::vector<int32_t> predictions(kBatch);
  ExampleBatch batch = f.Batch();
  EXPECT_OK(model->Evaluate(batch, absl::MakeSpan(predictions)));
  batch.sparse = nullptr;
  EXPECT_THAT(model->Evaluate(batch, absl::MakeSpan(predictions)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("needs every batch's sparse features")));
  f.slots[0] = 6;  // beyond the 6 pulled rows
  EXPECT_THAT(model->Evaluate(f.Batch(), absl::MakeSpan(predictions)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("outside the 6 pulled rows")));
  f.slots[0] = 0;
  std::vector<absl::Span<float>> grads;
  std::vector<std::vector<float>> grad_values;
  for (const auto& p : f.params) grad_values.emplace_back(p.size());
  for (auto& g : grad_values) grads.push_back(absl::MakeSpan(g));
  batch = f.Batch();
  f.sparse.row_gradients[1] = f.sparse.row_gradients[1].subspan(1);
  EXPECT_THAT(model->TrainStep(batch, grads),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("row gradient buffer per table")));
  f.labels[0] = 2;
  EXPECT_THAT(model->Evaluate(f.Batch(), absl::MakeSpan(predictions)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("has label 2; the model takes 0 or 1")));
}

}  // namespace
}  // namespace psflow
