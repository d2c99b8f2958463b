#include "model/graph/graph_model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "model/device/cpu/cpu_device.h"
#include "model/initializer.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

GraphConfig Parse(const std::string& json) {
  GraphConfig graph;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &graph);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString();
  return graph;
}

// A graph model with random parameters, features, labels and (for
// categorical inputs) sparse features, for gradient checks.
class Harness {
 public:
  Harness(const std::string& json, const InputSpec& input, int64_t batch,
          int threads = 1)
      : batch_(batch), device_(CreateCpuDevice(threads)) {
    auto definition = GraphDefinition::Create(Parse(json), input);
    EXPECT_OK(definition.status());
    if (!definition.ok()) return;
    definition_ = *std::move(definition);
    model_ = *definition_->Instantiate(device_.get(), batch);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> value(-1, 1);
    params_ = InitialValues(definition_->variables(), 7);
    for (auto& p : params_) {
      for (float& x : p) x += 0.3f * value(rng);
    }
    features_.resize(batch * input.num_features());
    for (float& x : features_) x = value(rng);
    std::uniform_int_distribution<int32_t> label(0, input.num_classes - 1);
    labels_.resize(batch);
    for (int32_t& y : labels_) y = label(rng);
    for (const ModelVariable& v : definition_->variables()) {
      gradients_.emplace_back(v.num_elements());
    }
    if (input.num_fields > 0) MakeSparse(input.num_fields, rng);
  }

  bool ok() const { return model_ != nullptr; }

  // Mean training loss; fills the gradients (rows' too).
  double TrainLoss() {
    Load();
    std::vector<absl::Span<float>> spans;
    for (auto& g : gradients_) spans.push_back(absl::MakeSpan(g));
    absl::StatusOr<BatchStats> stats = model_->TrainStep(Batch(), spans);
    EXPECT_OK(stats.status());
    return stats.ok() ? stats->loss_sum / batch_ : NAN;
  }

  // Every variable's gradient, and every table row's, against central
  // differences of the loss.
  void ExpectGradientsMatchFiniteDifferences() {
    TrainLoss();
    const auto analytic = gradients_;
    const auto analytic_rows = row_gradients_;
    std::mt19937 rng(6);
    auto check = [&](std::vector<float>& x, const std::vector<float>& grad,
                     const std::string& what) {
      SCOPED_TRACE(what);
      std::uniform_int_distribution<size_t> pick(0, x.size() - 1);
      for (int probe = 0; probe < 10; ++probe) {
        const size_t i = probe == 0 ? 0 : pick(rng);
        const float saved = x[i];
        const float h = 1e-3f;
        x[i] = saved + h;
        const double up = TrainLoss();
        x[i] = saved - h;
        const double down = TrainLoss();
        x[i] = saved;
        const double numeric = (up - down) / (2 * h);
        EXPECT_NEAR(grad[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
            << "element " << i;
      }
    };
    for (size_t v = 0; v < params_.size(); ++v) {
      check(params_[v], analytic[v], definition_->variables()[v].name());
    }
    for (size_t t = 0; t < rows_.size(); ++t) {
      check(rows_[t], analytic_rows[t], definition_->tables()[t].name());
    }
  }

  // One training step whose gradients start as NaN, with
  // batch.gradient_ready set: each reported variable's index and a copy of
  // its gradient span as it was at the call.
  struct Reported {
    std::vector<int> order;
    std::vector<std::vector<float>> at_call;
  };
  Reported TrainReportingReadiness() {
    Load();
    Reported reported;
    reported.at_call.resize(gradients_.size());
    std::vector<absl::Span<float>> spans;
    for (auto& g : gradients_) {
      std::fill(g.begin(), g.end(), NAN);
      spans.push_back(absl::MakeSpan(g));
    }
    ExampleBatch batch = Batch();
    batch.gradient_ready = [&](int v) {
      reported.order.push_back(v);
      reported.at_call[v] = gradients_[v];
    };
    EXPECT_OK(model_->TrainStep(batch, spans).status());
    return reported;
  }
  const std::vector<std::vector<float>>& gradients() const {
    return gradients_;
  }

  Model& model() { return *model_; }
  ExampleBatch Batch() {
    ExampleBatch batch{batch_, features_, labels_, 5};
    if (!rows_.empty()) {
      sparse_.rows.clear();
      sparse_.row_gradients.clear();
      for (size_t t = 0; t < rows_.size(); ++t) {
        sparse_.rows.push_back(rows_[t]);
        sparse_.row_gradients.push_back(absl::MakeSpan(row_gradients_[t]));
      }
      batch.sparse = &sparse_;
    }
    return batch;
  }

 private:
  // Bags of 0 to 3 ids per field over 7 distinct ids.
  void MakeSparse(int fields, std::mt19937& rng) {
    std::uniform_int_distribution<int> bag(0, 3), slot(0, 6);
    offsets_.push_back(0);
    for (int64_t i = 0; i < batch_ * fields; ++i) {
      const int n = i == 0 ? 2 : bag(rng);  // field 0 of example 0: 2 ids
      for (int k = 0; k < n; ++k) {
        const int s = slot(rng);
        ids_.push_back(100 + s);
        slots_.push_back(s);
      }
      offsets_.push_back(static_cast<int64_t>(ids_.size()));
    }
    sparse_.num_fields = fields;
    sparse_.offsets = offsets_;
    sparse_.ids = ids_;
    sparse_.slots = slots_;
    sparse_.num_unique = 7;
    std::uniform_real_distribution<float> value(-1, 1);
    for (const ModelTable& table : definition_->tables()) {
      rows_.emplace_back(7 * table.dim());
      for (float& x : rows_.back()) x = value(rng);
      row_gradients_.emplace_back(7 * table.dim());
    }
  }

  void Load() {
    std::vector<absl::Span<const float>> spans;
    for (const auto& p : params_) spans.push_back(p);
    ASSERT_OK(model_->LoadParameters(spans));
  }

  const int64_t batch_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<GraphDefinition> definition_;
  std::unique_ptr<Model> model_;
  std::vector<std::vector<float>> params_, gradients_, rows_, row_gradients_;
  std::vector<float> features_;
  std::vector<int32_t> labels_;
  std::vector<int64_t> offsets_, ids_;
  std::vector<int32_t> slots_;
  SparseBatch sparse_;
};

InputSpec Dense(int64_t features, int64_t classes) {
  InputSpec input;
  input.example_shape = {features};
  input.num_classes = classes;
  return input;
}

TEST(GraphModelTest, ConcatenateAddAndMultiplyGradients) {
  Harness h(R"({
    "inputs": [{"name": "x", "features": {}}],
    "nodes": [
      {"name": "a", "inputs": ["x"], "layer": {"Dense": {"units": 4}}},
      {"name": "b", "inputs": ["x"],
       "layer": {"Dense": {"units": 4, "activation": "tanh"}}},
      {"name": "joined", "inputs": ["a", "b"], "layer": {"Concatenate": {}}},
      {"name": "sum", "inputs": ["a", "b", "a"], "layer": {"Add": {}}},
      {"name": "product", "inputs": ["a", "b", "sum"],
       "layer": {"Multiply": {}}},
      {"name": "all", "inputs": ["joined", "product"],
       "layer": {"Concatenate": {}}},
      {"name": "logits", "inputs": ["all"], "layer": {"Dense": {"units": 3}}}
    ],
    "output": {"node": "logits", "loss": "SOFTMAX_CROSS_ENTROPY"}
  })",
            Dense(6, 3), 5);
  ASSERT_TRUE(h.ok());
  h.ExpectGradientsMatchFiniteDifferences();
}

// Each variable is reported once, as backward finishes it (the last
// node's first, a node's variables in their order), its span already
// holding the value it ends the step with.
TEST(GraphModelTest, ReportsEachGradientOnceFinalInBackwardOrder) {
  Harness h(R"({
    "inputs": [{"name": "x", "features": {}}],
    "nodes": [
      {"name": "hidden", "inputs": ["x"],
       "layer": {"Dense": {"units": 4, "activation": "relu"}}},
      {"name": "middle", "inputs": ["hidden"],
       "layer": {"Dense": {"units": 5, "activation": "tanh"}}},
      {"name": "logits", "inputs": ["middle"], "layer": {"Dense": {"units": 3}}}
    ],
    "output": {"node": "logits", "loss": "SOFTMAX_CROSS_ENTROPY"}
  })",
            Dense(6, 3), 5);
  ASSERT_TRUE(h.ok());
  const Harness::Reported reported = h.TrainReportingReadiness();
  // Variables: hidden/kernel, hidden/bias, middle/..., logits/...
  EXPECT_THAT(reported.order, ::testing::ElementsAre(4, 5, 2, 3, 0, 1));
  for (size_t v = 0; v < h.gradients().size(); ++v) {
    SCOPED_TRACE(v);
    for (float x : h.gradients()[v]) ASSERT_FALSE(std::isnan(x));
    EXPECT_EQ(reported.at_call[v], h.gradients()[v]);
  }
}

TEST(GraphModelTest, ConcatenateAlongAnInnerAxis) {
  Harness h(R"({
    "inputs": [{"name": "x", "features": {}}],
    "nodes": [
      {"name": "a", "inputs": ["x"], "layer": {"Dense": {"units": 6}}},
      {"name": "a2", "inputs": ["a"], "layer": {"Reshape": {"target_shape": [2, 3]}}},
      {"name": "b", "inputs": ["x"], "layer": {"Dense": {"units": 4}}},
      {"name": "b2", "inputs": ["b"], "layer": {"Reshape": {"target_shape": [2, 2]}}},
      {"name": "joined", "inputs": ["a2", "b2"], "layer": {"Concatenate": {"axis": -1}}},
      {"name": "flat", "inputs": ["joined"], "layer": {"Flatten": {}}},
      {"name": "logits", "inputs": ["flat"], "layer": {"Dense": {"units": 3}}}
    ],
    "output": {"node": "logits", "loss": "SOFTMAX_CROSS_ENTROPY"}
  })",
            Dense(5, 3), 4);
  ASSERT_TRUE(h.ok());
  h.ExpectGradientsMatchFiniteDifferences();
}

TEST(GraphModelTest, DotInteractionGradientsWithAndWithoutTheDiagonal) {
  for (const char* self : {"false", "true"}) {
    SCOPED_TRACE(self);
    Harness h(absl::StrCat(R"({
      "inputs": [{"name": "x", "features": {}}],
      "nodes": [
        {"name": "f1", "inputs": ["x"], "layer": {"Dense": {"units": 3}}},
        {"name": "f2", "inputs": ["x"],
         "layer": {"Dense": {"units": 3, "activation": "tanh"}}},
        {"name": "f3", "inputs": ["x"],
         "layer": {"Dense": {"units": 3, "activation": "sigmoid"}}},
        {"name": "interact", "inputs": ["f1", "f2", "f3", "f1"],
         "layer": {"DotInteraction": {"self_interaction": )",
                           self, R"(}}},
        {"name": "both", "inputs": ["f1", "interact"],
         "layer": {"Concatenate": {}}},
        {"name": "logit", "inputs": ["both"], "layer": {"Dense": {"units": 1}}}
      ],
      "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
    })"),
              Dense(5, 2), 6);
    ASSERT_TRUE(h.ok());
    h.ExpectGradientsMatchFiniteDifferences();
  }
}

TEST(GraphModelTest, FactorizationMachineGradientsOnStackedAndSplitFields) {
  Harness h(R"({
    "inputs": [{"name": "x", "features": {}}],
    "nodes": [
      {"name": "f1", "inputs": ["x"], "layer": {"Dense": {"units": 4}}},
      {"name": "f2", "inputs": ["x"],
       "layer": {"Dense": {"units": 4, "activation": "tanh"}}},
      {"name": "fm", "inputs": ["f1", "f2"],
       "layer": {"FactorizationMachine": {}}},
      {"name": "wide", "inputs": ["x"], "layer": {"Dense": {"units": 8}}},
      {"name": "fields", "inputs": ["wide"],
       "layer": {"Reshape": {"target_shape": [-1, 2]}}},
      {"name": "fm2", "inputs": ["fields"],
       "layer": {"FactorizationMachine": {}}},
      {"name": "deep", "inputs": ["f1"], "layer": {"Dense": {"units": 1}}},
      {"name": "logit", "inputs": ["deep", "fm", "fm2"], "layer": {"Add": {}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })",
            Dense(5, 2), 6);
  ASSERT_TRUE(h.ok());
  h.ExpectGradientsMatchFiniteDifferences();
}

TEST(GraphModelTest, CrossGradientsFullAndLowRank) {
  Harness h(R"({
    "inputs": [{"name": "x", "features": {}}],
    "nodes": [
      {"name": "x0", "inputs": ["x"], "layer": {"Dense": {"units": 4}}},
      {"name": "c1", "inputs": ["x0"], "layer": {"Cross": {}}},
      {"name": "c2", "inputs": ["x0", "c1"],
       "layer": {"Cross": {"projection_dim": 2}}},
      {"name": "c3", "inputs": ["c2", "c1"],
       "layer": {"Cross": {"use_bias": false}}},
      {"name": "logits", "inputs": ["c3"], "layer": {"Dense": {"units": 3}}}
    ],
    "output": {"node": "logits", "loss": "SOFTMAX_CROSS_ENTROPY"}
  })",
            Dense(5, 3), 5);
  ASSERT_TRUE(h.ok());
  h.ExpectGradientsMatchFiniteDifferences();
}

// DLRM's shape on categorical data: pooled embeddings (a shared table, sum
// and mean) interacting with a bottom MLP; the rows' gradients checked
// like the variables'.
TEST(GraphModelTest, EmbeddingRowsGetTheirGradientsBack) {
  InputSpec input;
  input.example_shape = {3};
  input.num_classes = 2;
  input.num_fields = 2;
  Harness h(R"({
    "inputs": [
      {"name": "dense", "features": {}},
      {"name": "C0", "categorical": {"field": 0, "table": "emb", "dim": 2}},
      {"name": "C1", "categorical": {"field": 1, "table": "emb", "dim": 2,
                                     "pooling": "mean"}}
    ],
    "nodes": [
      {"name": "bottom", "inputs": ["dense"],
       "layer": {"Dense": {"units": 2, "activation": "tanh"}}},
      {"name": "interact", "inputs": ["bottom", "C0", "C1"],
       "layer": {"DotInteraction": {}}},
      {"name": "top", "inputs": ["bottom", "interact", "C1"],
       "layer": {"Concatenate": {}}},
      {"name": "logit", "inputs": ["top"], "layer": {"Dense": {"units": 1}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })",
            input, 5);
  ASSERT_TRUE(h.ok());
  h.ExpectGradientsMatchFiniteDifferences();
}

TEST(GraphModelTest, ScoresAreSigmoidProbabilities) {
  Harness h(R"({
    "inputs": [{"name": "x", "features": {}}],
    "nodes": [{"name": "logit", "inputs": ["x"], "layer": {"Dense": {"units": 1}}}],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })",
            Dense(4, 2), 3);
  ASSERT_TRUE(h.ok());
  h.TrainLoss();
  std::vector<float> p(3);
  ASSERT_OK(h.model().Score(h.Batch(), absl::MakeSpan(p)).status());
  std::vector<int32_t> predicted(3);
  ASSERT_OK(h.model().Evaluate(h.Batch(), absl::MakeSpan(predicted)).status());
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(p[i], 0.0f);
    EXPECT_LT(p[i], 1.0f);
    EXPECT_EQ(predicted[i], p[i] >= 0.5f ? 1 : 0);
  }
}

// On the CPU, UseParameters reads the caller's buffers in place and
// TrainStep writes the gradients straight into the caller's spans: the
// same gradients as copying, a change to the bound buffer seen by the
// next step, and LoadParameters back to the model's own copy.
TEST(GraphModelTest, CpuModelReadsParametersInPlaceUntilLoadParameters) {
  constexpr char kGraph[] = R"({
    "inputs": [{"name": "x", "features": {}}],
    "nodes": [
      {"name": "hidden", "inputs": ["x"],
       "layer": {"Dense": {"units": 4, "activation": "relu"}}},
      {"name": "normalized", "inputs": ["hidden"],
       "layer": {"BatchNormalization": {}}},
      {"name": "logits", "inputs": ["normalized"],
       "layer": {"Dense": {"units": 3}}}
    ],
    "output": {"node": "logits", "loss": "SOFTMAX_CROSS_ENTROPY"}
  })";
  Harness h(kGraph, Dense(6, 3), 5);
  ASSERT_TRUE(h.ok());
  Model& model = h.model();
  auto definition = GraphDefinition::Create(Parse(kGraph), Dense(6, 3));
  ASSERT_OK(definition.status());
  std::vector<std::vector<float>> params =
      InitialValues((*definition)->variables(), 3);
  auto consts = [](const std::vector<std::vector<float>>& p) {
    std::vector<absl::Span<const float>> spans;
    for (const auto& v : p) spans.push_back(v);
    return spans;
  };
  // Gradients of one step, into buffers that start as NaN.
  auto step = [&] {
    std::vector<std::vector<float>> grads;
    std::vector<absl::Span<float>> spans;
    for (const auto& v : params) grads.emplace_back(v.size(), NAN);
    for (auto& g : grads) spans.push_back(absl::MakeSpan(g));
    EXPECT_OK(model.TrainStep(h.Batch(), spans).status());
    return grads;
  };
  ASSERT_OK(model.LoadParameters(consts(params)));
  const auto copied = step();
  ASSERT_OK(model.UseParameters(consts(params)));
  EXPECT_EQ(step(), copied);

  // Bound: the model reads the buffers as they are now.
  std::vector<std::vector<float>> doubled = params;
  for (auto& v : doubled) {
    for (float& x : v) x *= 2;
  }
  ASSERT_OK(model.LoadParameters(consts(doubled)));
  const auto at_doubled = step();
  ASSERT_NE(at_doubled, copied);
  ASSERT_OK(model.UseParameters(consts(params)));
  for (size_t v = 0; v < params.size(); ++v) {  // the bound memory itself
    std::copy(doubled[v].begin(), doubled[v].end(), params[v].begin());
  }
  EXPECT_EQ(step(), at_doubled);

  // LoadParameters copies, and the model no longer reads the old buffers.
  ASSERT_OK(model.LoadParameters(consts(params)));
  for (auto& v : params) std::fill(v.begin(), v.end(), 0.0f);
  EXPECT_EQ(step(), at_doubled);

  std::vector<absl::Span<const float>> short_spans = consts(params);
  short_spans.pop_back();
  EXPECT_THAT(model.UseParameters(short_spans),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("parameter arrays")));
}

TEST(GraphModelTest, RejectsLabelsTheLossCannotTake) {
  Harness h(R"({
    "inputs": [{"name": "x", "features": {}}],
    "nodes": [{"name": "logits", "inputs": ["x"], "layer": {"Dense": {"units": 3}}}],
    "output": {"node": "logits", "loss": "SOFTMAX_CROSS_ENTROPY"}
  })",
            Dense(4, 3), 2);
  ASSERT_TRUE(h.ok());
  std::vector<float> features(8);
  std::vector<int32_t> labels = {0, 3};
  ExampleBatch batch{2, features, labels, 0};
  EXPECT_THAT(h.model().Evaluate(batch, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("example 1 has label 3")));
}

}  // namespace
}  // namespace psflow
