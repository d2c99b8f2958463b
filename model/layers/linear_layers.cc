// Conv2D and Dense: one kernel, since a Dense layer is a 1x1 convolution
// over a 1x1 image. The forward pass is y = cols(x) * kernel (+ bias, then
// the activation), where cols is im2col's patch matrix (x itself for a 1x1
// window with stride 1 and no padding); the backward pass is
// d(kernel) = cols^T dy, d(bias) = column sums of dy, dx = col2im(dy
// kernel^T).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layers/layers.h"

namespace psflow {

namespace {

// A 1x1 window with stride 1 and no padding: x is its own patch matrix.
bool IsPointwise(const WindowGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pad_top == 0 &&
         g.pad_left == 0;
}

class LinearKernel final : public LayerKernel {
 public:
  LinearKernel(Device* device, const WindowGeometry& g, int64_t filters,
               bool use_bias, Activation activation, const LayerArrays& arrays)
      : device_(device),
        geometry_(g),
        filters_(filters),
        use_bias_(use_bias),
        activation_(activation),
        arrays_(arrays) {}

  absl::Status Allocate(int64_t max_batch) {
    if (Pointwise()) return absl::OkStatus();
    WindowGeometry g = geometry_;
    g.n = max_batch;
    const int64_t scratch = device_->ConvScratchFloats(g);
    ASSIGN_OR_RETURN(cols_, device_->Allocate(scratch));
    ASSIGN_OR_RETURN(dcols_, device_->Allocate(scratch));
    return absl::OkStatus();
  }

  absl::Status Forward(const StepContext& step, const DeviceArray& x,
                       DeviceArray& y) override {
    const WindowGeometry g = Batch(step.batch);
    const int64_t rows = g.patch_rows();
    if (Pointwise()) {
      RETURN_IF_ERROR(device_->Gemm(false, false, rows, filters_,
                                    g.patch_cols(), 1.0f, x, kernel(), 0.0f,
                                    y));
    } else {
      RETURN_IF_ERROR(
          device_->ConvForward(g, filters_, x, kernel(), *cols_, y));
    }
    if (use_bias_) {
      return device_->BiasActivation(rows, filters_, bias(), activation_, y);
    }
    if (activation_ == Activation::kNone) return absl::OkStatus();
    return device_->Activate(rows * filters_, activation_, y, y);
  }

  absl::Status Backward(const StepContext& step, const DeviceArray& x,
                        const DeviceArray& y, DeviceArray& dy,
                        DeviceArray* dx) override {
    const WindowGeometry g = Batch(step.batch);
    const int64_t rows = g.patch_rows(), k = g.patch_cols();
    if (activation_ != Activation::kNone) {
      RETURN_IF_ERROR(
          device_->ActivationBackward(rows * filters_, activation_, y, dy));
    }
    if (use_bias_) {
      RETURN_IF_ERROR(
          device_->ColumnSums(rows, filters_, dy, *arrays_.gradients[1]));
    }
    if (!Pointwise()) {
      return device_->ConvBackward(g, filters_, x, dy, kernel(), *cols_,
                                   *dcols_, *arrays_.gradients[0], dx);
    }
    RETURN_IF_ERROR(device_->Gemm(true, false, k, filters_, rows, 1.0f, x, dy,
                                  0.0f, *arrays_.gradients[0]));
    if (dx == nullptr) return absl::OkStatus();
    return device_->Gemm(false, true, rows, k, filters_, 1.0f, dy, kernel(),
                         0.0f, *dx);
  }

 private:
  bool Pointwise() const { return IsPointwise(geometry_); }
  WindowGeometry Batch(int64_t n) const {
    WindowGeometry g = geometry_;
    g.n = n;
    return g;
  }
  const DeviceArray& kernel() const { return *arrays_.values[0]; }
  const DeviceArray& bias() const { return *arrays_.values[1]; }

  Device* const device_;
  const WindowGeometry geometry_;  // n = 1
  const int64_t filters_;
  const bool use_bias_;
  const Activation activation_;
  const LayerArrays arrays_;
  std::shared_ptr<DeviceArray> cols_, dcols_;  // unless pointwise
};

class LinearLayer final : public Layer {
 public:
  LinearLayer(std::string name, const Shape& input, Shape output,
              const WindowGeometry& g, int64_t filters, bool use_bias,
              Activation activation, std::string description)
      : Layer(std::move(name), input, std::move(output)),
        geometry_(g),
        filters_(filters),
        use_bias_(use_bias),
        activation_(activation),
        description_(std::move(description)) {
    Shape kernel_shape = {g.kh, g.kw, g.c, filters};
    if (input.size() == 1) kernel_shape = {g.c, filters};  // Dense
    AddVariable("kernel", kernel_shape, Initializer::kGlorotUniform);
    if (use_bias) AddVariable("bias", {filters}, Initializer::kZeros);
  }

  std::string Describe() const override {
    return absl::StrCat(name(), " (", description_, ") -> ",
                        ShapeString(output_shape()));
  }

  int64_t ForwardMacs() const override {
    return geometry_.oh * geometry_.ow * geometry_.patch_cols() * filters_;
  }

  // LinearKernel::Allocate: the patches and their gradient
  // (Device::ConvScratchFloats each), unless the window is pointwise: the
  // whole patch matrix, capped on the CPU backend, which builds larger
  // ones a few images at a time in buffers of its own.
  int64_t ScratchFloatsPerExample() const override {
    return IsPointwise(geometry_)
               ? 0
               : 2 * geometry_.oh * geometry_.ow * geometry_.patch_cols();
  }
  int64_t ScratchCapFloats() const override {
    return IsPointwise(geometry_) ? 0 : 2 * kCpuWholeConvolutionFloats;
  }
  // Built a group at a time, the backward pass also sums the kernel's
  // gradient in up to kCpuConvolutionMaxPartials partials, whatever the
  // batch (counted whenever the patches are built at all).
  int64_t ScratchFloatsFixed() const override {
    return IsPointwise(geometry_)
               ? 0
               : kCpuConvolutionMaxPartials * geometry_.patch_cols() * filters_;
  }
  // CpuConvolution's per-thread group buffers (cols and dcols): a group
  // never holds less than one image, whose patches may far exceed the cap.
  int64_t ScratchFloatsPerThread() const override {
    return IsPointwise(geometry_) ? 0
                                  : 2 * std::max(kCpuConvolutionGroupFloats,
                                                 geometry_.oh * geometry_.ow *
                                                     geometry_.patch_cols());
  }

  absl::StatusOr<std::unique_ptr<LayerKernel>> Instantiate(
      Device* device, int64_t max_batch,
      const LayerArrays& arrays) const override {
    auto kernel = std::make_unique<LinearKernel>(
        device, geometry_, filters_, use_bias_, activation_, arrays);
    RETURN_IF_ERROR(kernel->Allocate(max_batch));
    return kernel;
  }

 private:
  const WindowGeometry geometry_;
  const int64_t filters_;
  const bool use_bias_;
  const Activation activation_;
  const std::string description_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> MakeConv2D(
    std::string name, const Shape& input, int64_t filters,
    const Window2D& window, bool use_bias, Activation activation) {
  ASSIGN_OR_RETURN(WindowGeometry g, PlanWindow(input, window));
  return std::make_unique<LinearLayer>(
      std::move(name), input, Shape{g.oh, g.ow, filters}, g, filters, use_bias,
      activation,
      absl::StrCat("Conv2D ", filters, " ", window.kh, "x", window.kw,
                   " stride ", window.sh, "x", window.sw,
                   window.padding == Padding::kSame ? " same" : " valid",
                   use_bias ? "" : " no bias",
                   activation == Activation::kNone
                       ? ""
                       : absl::StrCat(" ", ActivationName(activation))));
}

absl::StatusOr<std::unique_ptr<Layer>> MakeDense(std::string name,
                                                 const Shape& input,
                                                 int64_t units, bool use_bias,
                                                 Activation activation) {
  if (input.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Dense takes a vector per example, its input is ", ShapeString(input),
        "; put a Flatten or GlobalAveragePooling2D layer before it"));
  }
  WindowGeometry g;
  g.n = 1, g.h = 1, g.w = 1, g.c = input[0];
  g.kh = g.kw = g.sh = g.sw = 1;
  g.oh = g.ow = 1;
  return std::make_unique<LinearLayer>(
      std::move(name), input, Shape{units}, g, units, use_bias, activation,
      absl::StrCat("Dense ", units, use_bias ? "" : " no bias",
                   activation == Activation::kNone
                       ? ""
                       : absl::StrCat(" ", ActivationName(activation))));
}

}  // namespace psflow
