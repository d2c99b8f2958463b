#include "ps/optimizer.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = OptimizerParams::Kind;

// One scalar variable with its slots, updated step by step.
class ScalarVariable {
 public:
  explicit ScalarVariable(const OptimizerParams& config, float initial = 1.0f)
      : param_(1, initial) {
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
        Optimizer::Create(config);
    EXPECT_OK(optimizer);
    optimizer_ = *std::move(optimizer);
    for (size_t i = 0; i < optimizer_->slot_names().size(); ++i) {
      slots_.emplace_back(1, optimizer_->slot_initial_value(i));
    }
  }

  float Step(double lr, float grad) {
    std::vector<absl::Span<float>> spans;
    for (auto& slot : slots_) spans.push_back(absl::MakeSpan(slot));
    std::vector<float> g = {grad};
    optimizer_->Apply(lr, ++step_, absl::MakeSpan(param_), g, spans);
    return param_[0];
  }

  const Optimizer& optimizer() const { return *optimizer_; }

 private:
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<float> param_;
  std::vector<std::vector<float>> slots_;
  int64_t step_ = 0;
};

OptimizerParams Config(Kind kind) {
  OptimizerParams c;
  c.kind = kind;
  return c;
}

// References below were computed by hand (and double-checked in double
// precision); float results agree to ~1e-7 relative.
constexpr float kTol = 2e-7f;

TEST(OptimizerTest, SgdStepsAgainstTheGradient) {
  ScalarVariable var(Config(Kind::kSgd));
  EXPECT_TRUE(var.optimizer().slot_names().empty());
  EXPECT_NEAR(var.Step(0.1, 0.5f), 0.95f, kTol);
  EXPECT_NEAR(var.Step(0.1, -1.0f), 1.05f, kTol);
}

TEST(OptimizerTest, MomentumAccumulatesVelocity) {
  OptimizerParams c = Config(Kind::kMomentum);
  c.momentum = 0.9;
  ScalarVariable var(c);
  EXPECT_THAT(var.optimizer().slot_names(), ElementsAre("momentum"));
  // v = 0.5, p = 1 - 0.1 * 0.5
  EXPECT_NEAR(var.Step(0.1, 0.5f), 0.95f, kTol);
  // v = 0.9 * 0.5 + 0.5 = 0.95, p = 0.95 - 0.095
  EXPECT_NEAR(var.Step(0.1, 0.5f), 0.855f, kTol);
}

TEST(OptimizerTest, NesterovLooksAhead) {
  OptimizerParams c = Config(Kind::kMomentum);
  c.momentum = 0.9;
  c.nesterov = true;
  ScalarVariable var(c);
  // v = 0.5, p = 1 - 0.1 * (0.5 + 0.9 * 0.5)
  EXPECT_NEAR(var.Step(0.1, 0.5f), 0.905f, kTol);
  // v = 0.95, p = 0.905 - 0.1 * (0.5 + 0.855)
  EXPECT_NEAR(var.Step(0.1, 0.5f), 0.7695f, kTol);
}

TEST(OptimizerTest, AdagradScalesByAccumulatedSquares) {
  ScalarVariable var(Config(Kind::kAdagrad));
  // a = 0.1 + 0.25, p = 1 - 0.1 * 0.5 / (sqrt(0.35) + 1e-7)
  EXPECT_NEAR(var.Step(0.1, 0.5f), 0.9154845888f, kTol);
  // a = 0.35 + 0.0625
  EXPECT_NEAR(var.Step(0.1, -0.25f), 0.9544095300f, kTol);
}

TEST(OptimizerTest, AdamCorrectsBias) {
  ScalarVariable var(Config(Kind::kAdam));
  EXPECT_THAT(var.optimizer().slot_names(), ElementsAre("m", "v"));
  // Step 1: m_hat = g, v_hat = g^2, so the step is lr * g / |g| = 0.1.
  EXPECT_NEAR(var.Step(0.1, 0.5f), 0.9000000200f, kTol);
  EXPECT_NEAR(var.Step(0.1, -0.25f), 0.8733663228f, kTol);
}

TEST(OptimizerTest, AdamWDecaysWeightsDecoupledFromTheGradient) {
  OptimizerParams c = Config(Kind::kAdamW);
  c.weight_decay = 0.01;
  ScalarVariable var(c);
  // p = 1 * (1 - 0.1 * 0.01) - 0.1 * 0.9999998
  EXPECT_NEAR(var.Step(0.1, 0.5f), 0.8990000200f, kTol);
  EXPECT_NEAR(var.Step(0.1, -0.25f), 0.8714673228f, kTol);
}

TEST(OptimizerTest, ApplyingInRangesEqualsApplyingWhole) {
  OptimizerParams c = Config(Kind::kAdam);
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = Optimizer::Create(c);
  ASSERT_OK(opt);
  constexpr size_t kN = 1001;
  std::vector<float> p1(kN), p2(kN), g(kN), m1(kN), v1(kN), m2(kN), v2(kN);
  for (size_t i = 0; i < kN; ++i) {
    p1[i] = p2[i] = std::sin(i * 0.1f);
    g[i] = std::cos(i * 0.37f);
  }
  std::vector<absl::Span<float>> whole = {absl::MakeSpan(m1),
                                          absl::MakeSpan(v1)};
  (*opt)->Apply(0.01, 3, absl::MakeSpan(p1), g, whole);
  for (size_t begin = 0; begin < kN; begin += 100) {
    size_t len = std::min<size_t>(100, kN - begin);
    std::vector<absl::Span<float>> part = {
        absl::MakeSpan(m2).subspan(begin, len),
        absl::MakeSpan(v2).subspan(begin, len)};
    (*opt)->Apply(0.01, 3, absl::MakeSpan(p2).subspan(begin, len),
                  absl::MakeConstSpan(g).subspan(begin, len), part);
  }
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(v1, v2);
}

// A value that is not finite (memory a client wrote after the server's
// check) is applied as 0, by every optimizer and the moving average: the
// variable and its slots end exactly as if the client had sent 0 there.
TEST(OptimizerTest, GradientsThatAreNotFiniteAreAppliedAsZero) {
  std::vector<std::unique_ptr<Optimizer>> updates;
  for (Kind kind : {Kind::kSgd, Kind::kMomentum, Kind::kAdagrad, Kind::kAdam,
                    Kind::kAdamW, Kind::kFtrl}) {
    for (bool nesterov : {false, true}) {
      if (nesterov && kind != Kind::kMomentum) continue;
      OptimizerParams c = Config(kind);
      c.nesterov = nesterov;
      absl::StatusOr<std::unique_ptr<Optimizer>> opt = Optimizer::Create(c);
      ASSERT_OK(opt);
      updates.push_back(*std::move(opt));
    }
  }
  updates.push_back(MovingAverageUpdate(0.75f));
  constexpr size_t kN = 67;  // vector bodies and a scalar tail
  const std::vector<size_t> bad = {0, 5, 31, 32, 66};
  for (size_t u = 0; u < updates.size(); ++u) {
    const Optimizer& update = *updates[u];
    std::vector<float> clean(kN), poisoned(kN);
    for (size_t i = 0; i < kN; ++i) clean[i] = std::cos(i * 0.37f);
    for (size_t i : bad) clean[i] = 0.0f;
    poisoned = clean;
    poisoned[0] = std::nanf("");
    poisoned[5] = std::numeric_limits<float>::infinity();
    poisoned[31] = -std::numeric_limits<float>::infinity();
    poisoned[32] = -std::nanf("");
    poisoned[66] = std::numeric_limits<float>::infinity();
    std::vector<float> p1(kN), p2(kN);
    for (size_t i = 0; i < kN; ++i) p1[i] = p2[i] = std::sin(i * 0.1f);
    const size_t num_slots = update.slot_names().size();
    std::vector<std::vector<float>> s1(num_slots), s2(num_slots);
    std::vector<absl::Span<float>> spans1, spans2;
    for (size_t k = 0; k < num_slots; ++k) {
      s1[k].assign(kN, update.slot_initial_value(k) + 0.5f);
      s2[k] = s1[k];
      spans1.push_back(absl::MakeSpan(s1[k]));
      spans2.push_back(absl::MakeSpan(s2[k]));
    }
    for (int64_t step = 1; step <= 2; ++step) {
      update.Apply(0.01, step, absl::MakeSpan(p1), clean, spans1);
      update.Apply(0.01, step, absl::MakeSpan(p2), poisoned, spans2);
    }
    EXPECT_EQ(p1, p2) << "update " << u;
    EXPECT_EQ(s1, s2) << "update " << u;
    for (float value : p2) ASSERT_TRUE(std::isfinite(value)) << "update " << u;
  }
}

TEST(OptimizerTest, BadHyperparametersNameTheField) {
  OptimizerParams momentum = Config(Kind::kMomentum);
  momentum.momentum = 1.5;
  EXPECT_THAT(Optimizer::Create(momentum),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("momentum is 1.5")));
  OptimizerParams adam = Config(Kind::kAdam);
  adam.beta2 = 1.0;
  EXPECT_THAT(
      Optimizer::Create(adam),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("beta2 is 1")));
  adam.beta2 = 0.999;
  adam.epsilon = 0;
  EXPECT_THAT(
      Optimizer::Create(adam),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("epsilon is 0")));
  adam.epsilon = 1e-7;
  adam.weight_decay = 0.1;
  EXPECT_THAT(
      Optimizer::Create(adam),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("use adamw")));
  OptimizerParams adagrad = Config(Kind::kAdagrad);
  adagrad.initial_accumulator_value = -1;
  EXPECT_THAT(Optimizer::Create(adagrad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("initial_accumulator_value is -1")));
}

OptimizerParams Ftrl(double initial, double l1, double l2) {
  OptimizerParams c = Config(Kind::kFtrl);
  c.initial_accumulator_value = initial;
  c.l1 = l1;
  c.l2 = l2;
  return c;
}

// Accumulators chosen so every square root is exact: 9 -> 25 -> 169.
TEST(OptimizerTest, FtrlFollowsTheRegularizedLeader) {
  ScalarVariable var(Ftrl(/*initial=*/9, /*l1=*/0, /*l2=*/0));
  EXPECT_THAT(var.optimizer().slot_names(),
              ElementsAre("accumulator", "linear"));
  // z = 0 + 4 - (5 - 3) / 1 * 1 = 2;  w = -z / (5 / 1) = -0.4
  EXPECT_NEAR(var.Step(1.0, 4.0f), -0.4f, kTol);
  // z = 2 + 12 - (13 - 5) * -0.4 = 17.2;  w = -17.2 / 13
  EXPECT_NEAR(var.Step(1.0, 12.0f), -17.2f / 13.0f, 4 * kTol);
}

TEST(OptimizerTest, FtrlL1ZeroesWeightsWhoseLinearTermIsSmall) {
  // z = 2 as above: an L1 of 3 exceeds it, so the weight is exactly zero.
  ScalarVariable zeroed(Ftrl(9, /*l1=*/3, /*l2=*/0));
  EXPECT_EQ(zeroed.Step(1.0, 4.0f), 0.0f);
  // An L1 of 1 only shrinks it, and L2 adds 2 * l2 to the denominator:
  // w = (1 - 2) / (5 + 1).
  ScalarVariable shrunk(Ftrl(9, /*l1=*/1, /*l2=*/0.5));
  EXPECT_NEAR(shrunk.Step(1.0, 4.0f), -1.0f / 6.0f, kTol);
}

TEST(OptimizerTest, FtrlWithPowerZeroKeepsAConstantRate) {
  OptimizerParams c = Ftrl(0.1, 0, 0);
  c.learning_rate_power = 0;
  ScalarVariable var(c);
  // n^0 = 1 always: z = 2, w = -z / (1 / 0.5) = -1.
  EXPECT_NEAR(var.Step(0.5, 2.0f), -1.0f, kTol);
}

TEST(OptimizerTest, FtrlRejectsBadHyperparameters) {
  EXPECT_THAT(Optimizer::Create(Ftrl(0, 0, 0)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ftrl needs a positive value")));
  EXPECT_THAT(
      Optimizer::Create(Ftrl(0.1, -1, 0)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("l1 is -1")));
  EXPECT_THAT(
      Optimizer::Create(Ftrl(0.1, 0, -2)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("l2 is -2")));
  OptimizerParams c = Ftrl(0.1, 0, 0);
  c.learning_rate_power = 0.5;
  EXPECT_THAT(Optimizer::Create(c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("learning_rate_power is 0.5")));
}

// Momentum 0.75 and dyadic values: every step is exact in float.
TEST(OptimizerTest, MovingAverageKeepsMomentumOfTheOldValue) {
  std::unique_ptr<Optimizer> update = MovingAverageUpdate(0.75f);
  EXPECT_TRUE(update->slot_names().empty());
  std::vector<float> p = {4.0f, -8.0f};
  const std::vector<float> x = {8.0f, 0.0f};
  // The learning rate and the step play no part.
  update->Apply(/*lr=*/123.0, /*step=*/7, absl::MakeSpan(p), x, {});
  EXPECT_THAT(p, ElementsAre(5.0f, -6.0f));  // 0.75 * p + 0.25 * x
  update->Apply(/*lr=*/0.0, /*step=*/1, absl::MakeSpan(p), x, {});
  EXPECT_THAT(p, ElementsAre(5.75f, -4.5f));
}

}  // namespace
}  // namespace psflow
