// The wide-and-deep model on the CPU device: every gradient (dense
// variables and both tables' rows) against central finite differences of
// the mean log loss, sum and mean pooling, bags of zero, one and several
// ids, and bad batches refused with the reason.
#include "model/wide_deep.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

constexpr int kFields = 3;
constexpr int kDense = 2;
constexpr int kDim = 4;
constexpr int kBatch = 4;

WideDeepSpec Spec(WideDeepSpec::Pooling pooling) {
  WideDeepSpec spec;
  spec.num_fields = kFields;
  spec.num_dense = kDense;
  spec.embedding_dim = kDim;
  spec.hidden_sizes = {5};
  spec.pooling = pooling;
  return spec;
}

// A batch with bags of 0 to 2 ids over 6 distinct ids, its rows, and the
// model's parameters, all random.
struct Fixture {
  explicit Fixture(const WideDeepDefinition& definition, uint32_t seed = 1) {
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

class WideDeepTest : public ::testing::TestWithParam<WideDeepSpec::Pooling> {};

// Mean loss of the batch with the fixture's current values.
double MeanLoss(Model& model, Fixture& f) {
  EXPECT_OK(model.LoadParameters(f.Params()));
  std::vector<float> p(kBatch);
  absl::StatusOr<BatchStats> stats = model.Score(f.Batch(), absl::MakeSpan(p));
  EXPECT_OK(stats);
  return stats->loss_sum / kBatch;
}

TEST_P(WideDeepTest, GradientsMatchFiniteDifferences) {
  ASSERT_OK_AND_ASSIGN(auto definition,
                       WideDeepDefinition::Create(Spec(GetParam())));
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
                         ::testing::Values(WideDeepSpec::Pooling::kSum,
                                           WideDeepSpec::Pooling::kMean));

TEST(WideDeepDefinitionTest, DeclaresItsVariablesAndTables) {
  ASSERT_OK_AND_ASSIGN(auto definition,
                       WideDeepDefinition::Create(WideDeepSpec()));
  EXPECT_TRUE(definition->binary());
  ASSERT_EQ(definition->tables().size(), 2u);
  EXPECT_EQ(definition->tables()[0].name(), "embedding");
  EXPECT_EQ(definition->tables()[0].dim(), 16);
  EXPECT_EQ(definition->tables()[1].name(), "linear");
  EXPECT_EQ(definition->tables()[1].dim(), 1);
  // 26 x 16 + 13 inputs -> 256 -> 128 -> 1.
  EXPECT_EQ(definition->widths(), (std::vector<int64_t>{429, 256, 128, 1}));
  EXPECT_EQ(definition->variables().front().name(), "deep/dense_0/kernel");
  EXPECT_EQ(definition->variables().back().name(), "wide/bias");
  WideDeepSpec bad;
  bad.embedding_dim = 0;
  EXPECT_THAT(WideDeepDefinition::Create(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.wide_deep.embedding_dim is 0")));
}

TEST(WideDeepDefinitionTest, BadBatchesAreRefusedWithTheReason) {
  ASSERT_OK_AND_ASSIGN(auto definition, WideDeepDefinition::Create(
                                            Spec(WideDeepSpec::Pooling::kSum)));
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
  f.labels[0] = 2;
  EXPECT_THAT(
      model->Evaluate(f.Batch(), absl::MakeSpan(predictions)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs 0 or 1")));
}

}  // namespace
}  // namespace psflow
