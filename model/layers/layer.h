// One layer of a `model.layers` network or of a graph node (model/graph/),
// in two parts:
//
//   Layer        the definition: its name, input and output shapes (per
//                example) and variables, fixed by shape inference when the
//                model is defined (layer_factory.h). Immutable.
//   LayerKernel  that layer on one Device for batches of up to max_batch
//                examples, with the buffers its forward and backward passes
//                need. Used by one thread at a time.
//
// The model owns the device arrays of every variable's values and
// gradients and hands each layer its own (LayerArrays). For a
// moving-average variable (batch normalization's statistics) the
// "gradient" array receives the batch's statistic, which the worker
// pushes to the parameter servers like a gradient.
#ifndef PSFLOW_MODEL_LAYERS_LAYER_H_
#define PSFLOW_MODEL_LAYERS_LAYER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/device/device.h"
#include "model/model.h"

namespace psflow {

// The most units (Dense) or filters (Conv2D) a layer may have, and so the
// widest hidden layer of the mlp and wide_deep models.
inline constexpr int64_t kMaxLayerWidth = int64_t{1} << 20;

// A tensor's shape per example, e.g. {28, 28, 12} (NHWC without N) or
// {256}.
using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
// "28x28x12".
std::string ShapeString(const Shape& shape);

// One step's settings, shared by every layer.
struct StepContext {
  int64_t batch = 0;      // examples in this batch
  bool training = false;  // batch statistics and dropout on
  uint64_t seed = 0;      // this layer's randomness for this step
};

// A layer's variables on the device, in Layer::variables() order.
struct LayerArrays {
  std::vector<DeviceArray*> values;
  std::vector<DeviceArray*> gradients;
};

class LayerKernel {
 public:
  virtual ~LayerKernel() = default;

  // y[batch x output] from x[batch x input].
  virtual absl::Status Forward(const StepContext& step, const DeviceArray& x,
                               DeviceArray& y) = 0;

  // After a training Forward of the same x and y: writes the variables'
  // gradients and, when dx is non-null, d(loss)/dx from dy, which it may
  // overwrite.
  virtual absl::Status Backward(const StepContext& step, const DeviceArray& x,
                                const DeviceArray& y, DeviceArray& dy,
                                DeviceArray* dx) = 0;
};

class Layer {
 public:
  virtual ~Layer() = default;

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_; }
  const Shape& output_shape() const { return output_; }
  // Named "<name>/<variable>", e.g. "conv2d_1/kernel".
  const std::vector<ModelVariable>& variables() const { return variables_; }

  // One line, e.g. "conv2d (Conv2D 12 3x3 same) -> 28x28x12".
  virtual std::string Describe() const = 0;

  // Multiply-adds per example in a forward pass (for benchmarks).
  virtual int64_t ForwardMacs() const { return 0; }

  // Device floats per example its kernel allocates beyond the layer's
  // output and its gradient (im2col patches, dropout masks): what the
  // job's memory estimate counts (model/memory_estimate.h). Keep it in
  // step with the kernel's Allocate.
  virtual int64_t ScratchFloatsPerExample() const { return 0; }
  // The most floats of that scratch a batch of any size takes on the CPU
  // backend, where the host memory the estimate is checked against holds
  // it (0: no cap, ScratchFloatsPerExample() x the batch).
  virtual int64_t ScratchCapFloats() const { return 0; }
  // Floats each thread of the CPU backend holds for this layer on top of
  // that, whatever the batch (a convolution's patch groups and their
  // gradient, at least one image's patches each).
  virtual int64_t ScratchFloatsPerThread() const { return 0; }
  // Floats the CPU backend holds for this layer once, whatever the batch
  // and the threads (a convolution's kernel-gradient partial sums).
  virtual int64_t ScratchFloatsFixed() const { return 0; }

  // The layer on `device`; `arrays` stay valid for the kernel's lifetime.
  virtual absl::StatusOr<std::unique_ptr<LayerKernel>> Instantiate(
      Device* device, int64_t max_batch, const LayerArrays& arrays) const = 0;

 protected:
  Layer(std::string name, Shape input, Shape output)
      : name_(std::move(name)),
        input_(std::move(input)),
        output_(std::move(output)) {}

  // For constructors: declares a variable "<name>/<suffix>".
  void AddVariable(const std::string& suffix, Shape shape,
                   Initializer initializer,
                   VariableUpdate update = VariableUpdate::kOptimizer,
                   float momentum = 0);

 private:
  const std::string name_;
  const Shape input_, output_;
  std::vector<ModelVariable> variables_;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_LAYERS_LAYER_H_
