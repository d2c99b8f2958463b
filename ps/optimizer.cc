#include "ps/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "ps/finite_values.h"

namespace psflow {
namespace {

// The loops below are written so that gcc vectorizes them at -O3: plain
// indexed loops over restrict-qualified pointers, float arithmetic, scalars
// hoisted out. Each reads its gradient through FiniteOrZero (see
// ps/finite_values.h for why).

class Sgd final : public Optimizer {
 public:
  const std::vector<std::string>& slot_names() const override {
    static const auto* names = new std::vector<std::string>{};
    return *names;
  }
  double relative_cost() const override { return 0.5; }
  void Apply(double lr, int64_t, absl::Span<float> param,
             absl::Span<const float> grad,
             absl::Span<const absl::Span<float>>) const override {
    float* __restrict__ p = param.data();
    const float* __restrict__ g = grad.data();
    const float rate = static_cast<float>(lr);
    const size_t n = param.size();
    for (size_t i = 0; i < n; ++i) p[i] -= rate * FiniteOrZero(g[i]);
  }
};

class Momentum final : public Optimizer {
 public:
  Momentum(double momentum, bool nesterov)
      : momentum_(static_cast<float>(momentum)), nesterov_(nesterov) {}
  const std::vector<std::string>& slot_names() const override {
    static const auto* names = new std::vector<std::string>{"momentum"};
    return *names;
  }
  double relative_cost() const override { return 0.7; }
  void Apply(double lr, int64_t, absl::Span<float> param,
             absl::Span<const float> grad,
             absl::Span<const absl::Span<float>> slots) const override {
    float* __restrict__ p = param.data();
    const float* __restrict__ g = grad.data();
    float* __restrict__ v = slots[0].data();
    const float rate = static_cast<float>(lr);
    const float mu = momentum_;
    const size_t n = param.size();
    if (nesterov_) {
      for (size_t i = 0; i < n; ++i) {
        const float gi = FiniteOrZero(g[i]);
        v[i] = mu * v[i] + gi;
        p[i] -= rate * (gi + mu * v[i]);
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        v[i] = mu * v[i] + FiniteOrZero(g[i]);
        p[i] -= rate * v[i];
      }
    }
  }

 private:
  const float momentum_;
  const bool nesterov_;
};

class Adagrad final : public Optimizer {
 public:
  Adagrad(double initial, double epsilon)
      : initial_(static_cast<float>(initial)),
        epsilon_(static_cast<float>(epsilon)) {}
  const std::vector<std::string>& slot_names() const override {
    static const auto* names = new std::vector<std::string>{"accumulator"};
    return *names;
  }
  float slot_initial_value(int) const override { return initial_; }
  double relative_cost() const override { return 0.75; }
  void Apply(double lr, int64_t, absl::Span<float> param,
             absl::Span<const float> grad,
             absl::Span<const absl::Span<float>> slots) const override {
    float* __restrict__ p = param.data();
    const float* __restrict__ g = grad.data();
    float* __restrict__ a = slots[0].data();
    const float rate = static_cast<float>(lr);
    const float eps = epsilon_;
    const size_t n = param.size();
    for (size_t i = 0; i < n; ++i) {
      const float gi = FiniteOrZero(g[i]);
      a[i] += gi * gi;
      p[i] -= rate * gi / (std::sqrt(a[i]) + eps);
    }
  }

 private:
  const float initial_;
  const float epsilon_;
};

// Adam, and AdamW when weight_decay > 0.
class Adam final : public Optimizer {
 public:
  Adam(double beta1, double beta2, double epsilon, double weight_decay)
      : beta1_(beta1),
        beta2_(beta2),
        epsilon_(static_cast<float>(epsilon)),
        weight_decay_(weight_decay) {}
  const std::vector<std::string>& slot_names() const override {
    static const auto* names = new std::vector<std::string>{"m", "v"};
    return *names;
  }
  void Apply(double lr, int64_t step, absl::Span<float> param,
             absl::Span<const float> grad,
             absl::Span<const absl::Span<float>> slots) const override {
    float* __restrict__ p = param.data();
    const float* __restrict__ g = grad.data();
    float* __restrict__ m = slots[0].data();
    float* __restrict__ v = slots[1].data();
    const double t = static_cast<double>(step < 1 ? 1 : step);
    // Bias corrections folded into two scalars, computed in double.
    const float step_size =
        static_cast<float>(lr / (1.0 - std::pow(beta1_, t)));
    const float inv_sqrt_bc2 =
        static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(beta2_, t)));
    const float decay = static_cast<float>(1.0 - lr * weight_decay_);
    const float b1 = static_cast<float>(beta1_);
    const float b2 = static_cast<float>(beta2_);
    const float one_minus_b1 = static_cast<float>(1.0 - beta1_);
    const float one_minus_b2 = static_cast<float>(1.0 - beta2_);
    const float eps = epsilon_;
    const size_t n = param.size();
    for (size_t i = 0; i < n; ++i) {
      const float gi = FiniteOrZero(g[i]);
      const float mi = b1 * m[i] + one_minus_b1 * gi;
      const float vi = b2 * v[i] + one_minus_b2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] =
          p[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
    }
  }

 private:
  const double beta1_;
  const double beta2_;
  const float epsilon_;
  const double weight_decay_;
};

// FTRL-proximal in the TensorFlow/Keras form, per element, with power
// p = learning_rate_power (<= 0) and n the accumulator:
//   n' = n + g^2
//   z += g - (n'^-p - n^-p) / lr * w
//   w = |z| <= l1 ? 0 : (sign(z) l1 - z) / (n'^-p / lr + 2 l2)
// The weight is a function of the slots, so it is recomputed every step.
class Ftrl final : public Optimizer {
 public:
  Ftrl(double initial, double l1, double l2, double power)
      : initial_(static_cast<float>(initial)),
        l1_(static_cast<float>(l1)),
        l2_(static_cast<float>(l2)),
        power_(static_cast<float>(power)) {}
  const std::vector<std::string>& slot_names() const override {
    static const auto* names =
        new std::vector<std::string>{"accumulator", "linear"};
    return *names;
  }
  float slot_initial_value(int slot) const override {
    return slot == 0 ? initial_ : 0.0f;
  }
  // The square root's form; other powers call std::pow, which does not
  // vectorize.
  double relative_cost() const override { return power_ == -0.5f ? 5.0 : 20.0; }
  void Apply(double lr, int64_t, absl::Span<float> param,
             absl::Span<const float> grad,
             absl::Span<const absl::Span<float>> slots) const override {
    float* __restrict__ w = param.data();
    const float* __restrict__ g = grad.data();
    float* __restrict__ n = slots[0].data();
    float* __restrict__ z = slots[1].data();
    const float inv_lr = static_cast<float>(1.0 / lr);
    const float l1 = l1_;
    const float two_l2 = 2.0f * l2_;
    const size_t count = param.size();
    // p = -0.5 (the default) is a square root; other powers use pow.
    const bool sqrt_power = power_ == -0.5f;
    for (size_t i = 0; i < count; ++i) {
      const float gi = FiniteOrZero(g[i]);
      const float n_old = n[i];
      const float n_new = n_old + gi * gi;
      const float pow_old =
          sqrt_power ? std::sqrt(n_old) : std::pow(n_old, -power_);
      const float pow_new =
          sqrt_power ? std::sqrt(n_new) : std::pow(n_new, -power_);
      const float zi = z[i] + gi - (pow_new - pow_old) * inv_lr * w[i];
      n[i] = n_new;
      z[i] = zi;
      const float quadratic = pow_new * inv_lr + two_l2;
      const float shrunk = zi > 0 ? l1 - zi : -l1 - zi;
      w[i] = std::fabs(zi) <= l1 ? 0.0f : shrunk / quadratic;
    }
  }

 private:
  const float initial_;
  const float l1_;
  const float l2_;
  const float power_;
};

// Not an optimizer: a moving average of what is pushed. Sharing the
// interface lets a variable hold either and apply it the same way.
class MovingAverage final : public Optimizer {
 public:
  explicit MovingAverage(float momentum) : momentum_(momentum) {}
  const std::vector<std::string>& slot_names() const override {
    static const auto* names = new std::vector<std::string>{};
    return *names;
  }
  double relative_cost() const override { return 0.5; }
  void Apply(double, int64_t, absl::Span<float> param,
             absl::Span<const float> value,
             absl::Span<const absl::Span<float>>) const override {
    float* __restrict__ p = param.data();
    const float* __restrict__ x = value.data();
    const float keep = momentum_;
    const float take = 1.0f - momentum_;
    const size_t n = param.size();
    for (size_t i = 0; i < n; ++i) {
      p[i] = keep * p[i] + take * FiniteOrZero(x[i]);
    }
  }

 private:
  const float momentum_;
};

}  // namespace

std::unique_ptr<Optimizer> MovingAverageUpdate(float momentum) {
  return std::make_unique<MovingAverage>(momentum);
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(
    const OptimizerParams& c) {
  absl::Status valid = ValidateOptimizerParams(c);
  if (!valid.ok()) return valid;
  using Kind = OptimizerParams::Kind;
  switch (c.kind) {
    case Kind::kSgd:
      return std::unique_ptr<Optimizer>(new Sgd);
    case Kind::kMomentum:
      return std::unique_ptr<Optimizer>(new Momentum(c.momentum, c.nesterov));
    case Kind::kAdagrad:
      return std::unique_ptr<Optimizer>(
          new Adagrad(c.initial_accumulator_value, c.epsilon));
    case Kind::kAdam:
    case Kind::kAdamW:
      return std::unique_ptr<Optimizer>(
          new Adam(c.beta1, c.beta2, c.epsilon,
                   c.kind == Kind::kAdamW ? c.weight_decay : 0.0));
    case Kind::kFtrl:
      return std::unique_ptr<Optimizer>(new Ftrl(
          c.initial_accumulator_value, c.l1, c.l2, c.learning_rate_power));
  }
  return absl::InvalidArgumentError("optimizer: unknown kind");
}

}  // namespace psflow
