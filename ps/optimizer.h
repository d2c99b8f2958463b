// Optimizers applied on the parameter server, with their slots (per-element
// state such as Adam's moments) stored beside each variable.
//
//   sgd:       p -= lr * g
//   momentum:  v = momentum * v + g;  p -= lr * v
//              nesterov: p -= lr * (g + momentum * v)
//              (the TF1 MomentumOptimizer / PyTorch form)
//   adagrad:   a += g^2;  p -= lr * g / (sqrt(a) + epsilon)
//              (a starts at initial_accumulator_value, as in Keras)
//   adam:      m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//              p -= lr * m_hat / (sqrt(v_hat) + epsilon), with bias
//              corrections m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t)
//   adamw:     p -= lr * weight_decay * p (decoupled), then adam
//   ftrl:      n' = n + g^2;  z += g - (n'^-k - n^-k) / lr * p
//              p = |z| <= l1 ? 0 : (sign(z) l1 - z) / (n'^-k / lr + 2 l2)
//              (FTRL-proximal, k = learning_rate_power, n starts at
//              initial_accumulator_value; the Keras form)
//
// and, for non-trainable variables (batch normalization's moving mean and
// variance), not an optimizer but applied by the same code path:
//
//   moving average:  p = momentum * p + (1 - momentum) * x
//              (x is what the worker pushed; no slots; lr and t unused)
//
// `t` is the number of updates applied to the variable, from 1. Apply()
// works element-wise, so callers may split a tensor into ranges and apply
// them on several threads. Optimizer objects are immutable and thread-safe.
#ifndef PSFLOW_PS_OPTIMIZER_H_
#define PSFLOW_PS_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job/update_rule.h"

namespace psflow {

class Optimizer {
 public:
  // InvalidArgument naming the field for out-of-range hyperparameters
  // (ValidateOptimizerParams).
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(
      const OptimizerParams& config);

  virtual ~Optimizer() = default;

  // Names of the slots kept per variable, in the order Apply() takes them:
  // {} for sgd, {"momentum"}, {"accumulator"}, {"m", "v"},
  // {"accumulator", "linear"} for ftrl.
  virtual const std::vector<std::string>& slot_names() const = 0;

  // The value every element of slot `slot` starts at.
  virtual float slot_initial_value(int slot) const { return 0.0f; }

  // The apply's time per float relative to Adam's, as measured on one
  // thread at 1M floats with flush-to-zero (bench/optimizer_bench,
  // "threads"): what decides whether an apply is worth spreading over the
  // server's apply threads (ps/apply_pool.h). A scheduling hint only; no
  // result depends on it.
  virtual double relative_cost() const { return 1.0; }

  // One update of `param` by `grad` at learning rate `lr`, the `step`-th
  // update of this variable (from 1; an embedding row's own update count,
  // which makes Adam lazy). `slots` holds one span per slot name,
  // each as long as `param`. The caller has checked sizes and that `grad`
  // is finite; a value that is not (memory a client wrote after the check)
  // is applied as 0.
  virtual void Apply(double lr, int64_t step, absl::Span<float> param,
                     absl::Span<const float> grad,
                     absl::Span<const absl::Span<float>> slots) const = 0;
};

// The update of a moving-average variable (see the top of this file):
// `momentum` in [0, 1), which the caller has checked.
std::unique_ptr<Optimizer> MovingAverageUpdate(float momentum);

}  // namespace psflow

#endif  // PSFLOW_PS_OPTIMIZER_H_
