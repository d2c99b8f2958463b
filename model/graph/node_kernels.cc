#include "model/graph/node_kernels.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

using Arrays = std::vector<std::shared_ptr<DeviceArray>>;

// dst[n] = src[n], or dst += src.
absl::Status Put(Device& device, int64_t n, const DeviceArray& src,
                 DeviceArray& dst, bool accumulate) {
  return accumulate ? device.Axpy(n, 1.0f, src, dst)
                    : device.ScaleShift(n, 1.0f, 0.0f, src, dst);
}

// A single-input layer of model/layers/. Its kernel overwrites its input's
// gradient; a share to be added goes through a scratch array first.
class LayerNodeKernel final : public NodeKernel {
 public:
  LayerNodeKernel(Device* device, int64_t max_batch, int64_t input_size,
                  std::unique_ptr<LayerKernel> kernel)
      : device_(device),
        max_batch_(max_batch),
        input_size_(input_size),
        kernel_(std::move(kernel)) {}

  absl::Status Forward(const StepContext& step,
                       const std::vector<const DeviceArray*>& x,
                       DeviceArray& y) override {
    return kernel_->Forward(step, *x[0], y);
  }

  absl::Status Backward(const StepContext& step,
                        const std::vector<const DeviceArray*>& x,
                        const DeviceArray& y, DeviceArray& dy,
                        const std::vector<DeviceArray*>& dx,
                        const std::vector<bool>& accumulate) override {
    if (dx[0] == nullptr || !accumulate[0]) {
      return kernel_->Backward(step, *x[0], y, dy, dx[0]);
    }
    if (share_ == nullptr) {
      ASSIGN_OR_RETURN(share_, device_->Allocate(max_batch_ * input_size_));
    }
    RETURN_IF_ERROR(kernel_->Backward(step, *x[0], y, dy, share_.get()));
    return device_->Axpy(step.batch * input_size_, 1.0f, *share_, *dx[0]);
  }

 private:
  Device* const device_;
  const int64_t max_batch_, input_size_;
  std::unique_ptr<LayerKernel> kernel_;
  std::shared_ptr<DeviceArray> share_;  // allocated when first needed
};

// Joins [outer x inner_i] blocks per example into [outer x sum inner_i].
class ConcatenateKernel final : public NodeKernel {
 public:
  ConcatenateKernel(Device* device, const GraphNode& node) : device_(device) {
    outer_ = 1;
    for (int d = 0; d < node.axis; ++d) outer_ *= node.output[d];
    for (const Shape& in : node.input_shapes) {
      inner_.push_back(NumElements(in) / outer_);
    }
    total_ = NumElements(node.output) / outer_;
  }

  absl::Status Forward(const StepContext& step,
                       const std::vector<const DeviceArray*>& x,
                       DeviceArray& y) override {
    int64_t offset = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      RETURN_IF_ERROR(device_->CopyBlock(step.batch * outer_, inner_[i], *x[i],
                                         0, inner_[i], y, offset, total_,
                                         false));
      offset += inner_[i];
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const StepContext& step,
                        const std::vector<const DeviceArray*>&,
                        const DeviceArray&, DeviceArray& dy,
                        const std::vector<DeviceArray*>& dx,
                        const std::vector<bool>& accumulate) override {
    int64_t offset = 0;
    for (size_t i = 0; i < dx.size(); ++i) {
      if (dx[i] != nullptr) {
        RETURN_IF_ERROR(device_->CopyBlock(step.batch * outer_, inner_[i], dy,
                                           offset, total_, *dx[i], 0, inner_[i],
                                           accumulate[i]));
      }
      offset += inner_[i];
    }
    return absl::OkStatus();
  }

 private:
  Device* const device_;
  int64_t outer_ = 1, total_ = 0;
  std::vector<int64_t> inner_;
};

class AddKernel final : public NodeKernel {
 public:
  AddKernel(Device* device, int64_t size) : device_(device), size_(size) {}

  absl::Status Forward(const StepContext& step,
                       const std::vector<const DeviceArray*>& x,
                       DeviceArray& y) override {
    const int64_t n = step.batch * size_;
    RETURN_IF_ERROR(device_->ScaleShift(n, 1.0f, 0.0f, *x[0], y));
    for (size_t i = 1; i < x.size(); ++i) {
      RETURN_IF_ERROR(device_->Axpy(n, 1.0f, *x[i], y));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const StepContext& step,
                        const std::vector<const DeviceArray*>&,
                        const DeviceArray&, DeviceArray& dy,
                        const std::vector<DeviceArray*>& dx,
                        const std::vector<bool>& accumulate) override {
    for (size_t i = 0; i < dx.size(); ++i) {
      if (dx[i] == nullptr) continue;
      RETURN_IF_ERROR(
          Put(*device_, step.batch * size_, dy, *dx[i], accumulate[i]));
    }
    return absl::OkStatus();
  }

 private:
  Device* const device_;
  const int64_t size_;
};

class MultiplyKernel final : public NodeKernel {
 public:
  MultiplyKernel(Device* device, int64_t size, std::shared_ptr<DeviceArray> t)
      : device_(device), size_(size), product_(std::move(t)) {}

  absl::Status Forward(const StepContext& step,
                       const std::vector<const DeviceArray*>& x,
                       DeviceArray& y) override {
    const int64_t n = step.batch * size_;
    RETURN_IF_ERROR(device_->Multiply(n, *x[0], *x[1], y));
    for (size_t i = 2; i < x.size(); ++i) {
      RETURN_IF_ERROR(device_->Multiply(n, y, *x[i], y));
    }
    return absl::OkStatus();
  }

  // d(x_0 ... x_k)/dx_i = the product of the others.
  absl::Status Backward(const StepContext& step,
                        const std::vector<const DeviceArray*>& x,
                        const DeviceArray&, DeviceArray& dy,
                        const std::vector<DeviceArray*>& dx,
                        const std::vector<bool>& accumulate) override {
    const int64_t n = step.batch * size_;
    for (size_t i = 0; i < dx.size(); ++i) {
      if (dx[i] == nullptr) continue;
      RETURN_IF_ERROR(device_->ScaleShift(n, 1.0f, 0.0f, dy, *product_));
      for (size_t j = 0; j < x.size(); ++j) {
        if (j != i) {
          RETURN_IF_ERROR(device_->Multiply(n, *product_, *x[j], *product_));
        }
      }
      RETURN_IF_ERROR(Put(*device_, n, *product_, *dx[i], accumulate[i]));
    }
    return absl::OkStatus();
  }

 private:
  Device* const device_;
  const int64_t size_;
  std::shared_ptr<DeviceArray> product_;
};

// The F fields of width d that DotInteraction and FactorizationMachine
// read, as one [batch x F x d] array: the one [F, d] input itself, or the
// [d] inputs stacked.
class Fields {
 public:
  Fields(Device* device, const GraphNode& node, std::shared_ptr<DeviceArray> x)
      : device_(device),
        fields_(node.fields),
        width_(node.width),
        stacked_(node.inputs.size() > 1),
        x_(std::move(x)) {}

  int64_t fields() const { return fields_; }
  int64_t width() const { return width_; }
  int64_t per_example() const { return fields_ * width_; }

  absl::StatusOr<const DeviceArray*> Stack(
      int64_t batch, const std::vector<const DeviceArray*>& x) {
    if (!stacked_) return x[0];
    for (size_t f = 0; f < x.size(); ++f) {
      RETURN_IF_ERROR(device_->CopyBlock(batch, width_, *x[f], 0, width_, *x_,
                                         f * width_, per_example(), false));
    }
    return x_.get();
  }

  // Hands each input its part of dX [batch x F x d].
  absl::Status Split(int64_t batch, const DeviceArray& dX,
                     const std::vector<DeviceArray*>& dx,
                     const std::vector<bool>& accumulate) {
    if (!stacked_) {
      if (dx[0] == nullptr) return absl::OkStatus();
      return Put(*device_, batch * per_example(), dX, *dx[0], accumulate[0]);
    }
    for (size_t f = 0; f < dx.size(); ++f) {
      if (dx[f] == nullptr) continue;
      RETURN_IF_ERROR(device_->CopyBlock(batch, width_, dX, f * width_,
                                         per_example(), *dx[f], 0, width_,
                                         accumulate[f]));
    }
    return absl::OkStatus();
  }

 private:
  Device* const device_;
  const int64_t fields_, width_;
  const bool stacked_;
  std::shared_ptr<DeviceArray> x_;  // the stack (several inputs)
};

// Z = X X^T per example; the output is Z's upper triangle, row by row
// (with the diagonal when self_interaction).
class DotInteractionKernel final : public NodeKernel {
 public:
  DotInteractionKernel(Device* device, const GraphNode& node, Fields fields,
                       Arrays scratch)
      : device_(device),
        self_(node.self_interaction),
        out_(NumElements(node.output)),
        fields_(std::move(fields)),
        z_(scratch[0]),
        dz_(scratch[1]),
        dx_(scratch[2]) {}

  absl::Status Forward(const StepContext& step,
                       const std::vector<const DeviceArray*>& x,
                       DeviceArray& y) override {
    const int64_t f = fields_.fields(), d = fields_.width();
    ASSIGN_OR_RETURN(const DeviceArray* stacked, fields_.Stack(step.batch, x));
    RETURN_IF_ERROR(device_->BatchedGemm(false, true, f, f, d, 1.0f, *stacked,
                                         f * d, *stacked, f * d, 0.0f, *z_,
                                         f * f, step.batch));
    return Triangle(step.batch, /*to_output=*/true, y, *z_);
  }

  // dZ holds dy on the triangle and zeros elsewhere (never written), so
  // dX = (dZ + dZ^T) X.
  absl::Status Backward(const StepContext& step,
                        const std::vector<const DeviceArray*>& x,
                        const DeviceArray&, DeviceArray& dy,
                        const std::vector<DeviceArray*>& dx,
                        const std::vector<bool>& accumulate) override {
    const int64_t f = fields_.fields(), d = fields_.width();
    RETURN_IF_ERROR(Triangle(step.batch, /*to_output=*/false, dy, *dz_));
    ASSIGN_OR_RETURN(const DeviceArray* stacked, fields_.Stack(step.batch, x));
    RETURN_IF_ERROR(device_->BatchedGemm(false, false, f, d, f, 1.0f, *dz_,
                                         f * f, *stacked, f * d, 0.0f, *dx_,
                                         f * d, step.batch));
    RETURN_IF_ERROR(device_->BatchedGemm(true, false, f, d, f, 1.0f, *dz_,
                                         f * f, *stacked, f * d, 1.0f, *dx_,
                                         f * d, step.batch));
    return fields_.Split(step.batch, *dx_, dx, accumulate);
  }

 private:
  // Row i of the triangle: Z[i, i + 1 ..) (from i with the diagonal),
  // to the output (forward) or from its gradient into dZ (backward).
  absl::Status Triangle(int64_t batch, bool to_output, DeviceArray& out,
                        DeviceArray& square) {
    const int64_t f = fields_.fields();
    int64_t offset = 0;
    for (int64_t i = 0; i < f; ++i) {
      const int64_t first = self_ ? i : i + 1;
      const int64_t length = f - first;
      if (length == 0) continue;
      if (to_output) {
        RETURN_IF_ERROR(device_->CopyBlock(batch, length, square, i * f + first,
                                           f * f, out, offset, out_, false));
      } else {
        RETURN_IF_ERROR(device_->CopyBlock(batch, length, out, offset, out_,
                                           square, i * f + first, f * f,
                                           false));
      }
      offset += length;
    }
    return absl::OkStatus();
  }

  Device* const device_;
  const bool self_;
  const int64_t out_;
  Fields fields_;
  std::shared_ptr<DeviceArray> z_, dz_, dx_;
};

// 0.5 * sum_k ((sum_f x_fk)^2 - sum_f x_fk^2); d/dx_fk = S_k - x_fk.
class FactorizationMachineKernel final : public NodeKernel {
 public:
  FactorizationMachineKernel(Device* device, Fields fields, Arrays scratch)
      : device_(device),
        fields_(std::move(fields)),
        ones_(scratch[0]),
        sums_(scratch[1]),
        squares_(scratch[2]),
        wide_(scratch[3]),
        wide2_(scratch[4]),
        per_example_(scratch[5]) {}

  absl::Status Forward(const StepContext& step,
                       const std::vector<const DeviceArray*>& x,
                       DeviceArray& y) override {
    const int64_t f = fields_.fields(), d = fields_.width(), b = step.batch;
    const int64_t fd = f * d;
    ASSIGN_OR_RETURN(const DeviceArray* stacked, fields_.Stack(b, x));
    // S = 1[1 x F] X[F x d] per example.
    RETURN_IF_ERROR(device_->BatchedGemm(false, false, 1, d, f, 1.0f, *ones_, 0,
                                         *stacked, fd, 0.0f, *sums_, d, b));
    RETURN_IF_ERROR(device_->Multiply(b * d, *sums_, *sums_, *squares_));
    RETURN_IF_ERROR(device_->Multiply(b * fd, *stacked, *stacked, *wide_));
    // Per example: sum of every x_fk^2, and 0.5 * sum_k S_k^2.
    RETURN_IF_ERROR(device_->BatchedGemm(false, false, 1, 1, fd, 1.0f, *ones_,
                                         0, *wide_, fd, 0.0f, *per_example_, 1,
                                         b));
    RETURN_IF_ERROR(
        device_->Gemm(false, false, b, 1, d, 0.5f, *squares_, *ones_, 0.0f, y));
    return device_->Axpy(b, -0.5f, *per_example_, y);
  }

  absl::Status Backward(const StepContext& step,
                        const std::vector<const DeviceArray*>& x,
                        const DeviceArray&, DeviceArray& dy,
                        const std::vector<DeviceArray*>& dx,
                        const std::vector<bool>& accumulate) override {
    const int64_t f = fields_.fields(), d = fields_.width(), b = step.batch;
    const int64_t fd = f * d;
    ASSIGN_OR_RETURN(const DeviceArray* stacked, fields_.Stack(b, x));
    // wide = S broadcast over the fields, minus X.
    RETURN_IF_ERROR(device_->BatchedGemm(false, false, f, d, 1, 1.0f, *ones_, 0,
                                         *sums_, d, 0.0f, *wide_, fd, b));
    RETURN_IF_ERROR(device_->Axpy(b * fd, -1.0f, *stacked, *wide_));
    // wide2 = dy broadcast over the example's values; times wide.
    RETURN_IF_ERROR(
        device_->Gemm(false, false, b, fd, 1, 1.0f, dy, *ones_, 0.0f, *wide2_));
    RETURN_IF_ERROR(device_->Multiply(b * fd, *wide2_, *wide_, *wide2_));
    return fields_.Split(b, *wide2_, dx, accumulate);
  }

 private:
  Device* const device_;
  Fields fields_;
  std::shared_ptr<DeviceArray> ones_, sums_, squares_, wide_, wide2_,
      per_example_;
};

// DCN-v2: y = x0 * (x W + b) + x, W full rank [d, d] or U [d, r] V [r, d].
class CrossKernel final : public NodeKernel {
 public:
  CrossKernel(Device* device, const GraphNode& node, const LayerArrays& arrays,
              Arrays scratch)
      : device_(device),
        width_(node.output[0]),
        rank_(node.projection_dim),
        use_bias_(node.use_bias),
        arrays_(arrays),
        u_(scratch[0]),
        du_(scratch[1]),
        share_x_(scratch[2]),
        share_x0_(scratch[3]),
        v_(scratch[4]),
        dv_(scratch[5]) {}

  absl::Status Forward(const StepContext& step,
                       const std::vector<const DeviceArray*>& x,
                       DeviceArray& y) override {
    const int64_t b = step.batch, d = width_;
    const DeviceArray& x0 = *x[0];
    const DeviceArray& xx = *x.back();
    if (rank_ == 0) {
      RETURN_IF_ERROR(
          device_->Gemm(false, false, b, d, d, 1.0f, xx, W(), 0.0f, *u_));
    } else {
      RETURN_IF_ERROR(
          device_->Gemm(false, false, b, rank_, d, 1.0f, xx, U(), 0.0f, *v_));
      RETURN_IF_ERROR(
          device_->Gemm(false, false, b, d, rank_, 1.0f, *v_, V(), 0.0f, *u_));
    }
    if (use_bias_) {
      RETURN_IF_ERROR(
          device_->BiasActivation(b, d, Bias(), Activation::kNone, *u_));
    }
    RETURN_IF_ERROR(device_->Multiply(b * d, x0, *u_, y));
    return device_->Axpy(b * d, 1.0f, xx, y);
  }

  absl::Status Backward(const StepContext& step,
                        const std::vector<const DeviceArray*>& x,
                        const DeviceArray&, DeviceArray& dy,
                        const std::vector<DeviceArray*>& dx,
                        const std::vector<bool>& accumulate) override {
    const int64_t b = step.batch, d = width_, n = b * d;
    const DeviceArray& x0 = *x[0];
    const DeviceArray& xx = *x.back();
    // du = dy * x0: the gradient of x W + b.
    RETURN_IF_ERROR(device_->Multiply(n, dy, x0, *du_));
    // x's share: dy (the residual) + du W^T.
    if (rank_ == 0) {
      RETURN_IF_ERROR(device_->Gemm(true, false, d, d, b, 1.0f, xx, *du_, 0.0f,
                                    Gradient(0)));
      RETURN_IF_ERROR(device_->Gemm(false, true, b, d, d, 1.0f, *du_, W(), 0.0f,
                                    *share_x_));
    } else {
      RETURN_IF_ERROR(device_->Gemm(true, false, rank_, d, b, 1.0f, *v_, *du_,
                                    0.0f, Gradient(1)));
      RETURN_IF_ERROR(
          device_->Gemm(false, true, b, rank_, d, 1.0f, *du_, V(), 0.0f, *dv_));
      RETURN_IF_ERROR(device_->Gemm(true, false, d, rank_, b, 1.0f, xx, *dv_,
                                    0.0f, Gradient(0)));
      RETURN_IF_ERROR(device_->Gemm(false, true, b, d, rank_, 1.0f, *dv_, U(),
                                    0.0f, *share_x_));
    }
    if (use_bias_) {
      RETURN_IF_ERROR(device_->ColumnSums(b, d, *du_, Gradient(BiasIndex())));
    }
    RETURN_IF_ERROR(device_->Axpy(n, 1.0f, dy, *share_x_));
    // x0's share: dy * (x W + b).
    RETURN_IF_ERROR(device_->Multiply(n, dy, *u_, *share_x0_));
    if (x.size() == 1) {  // x0 is x
      if (dx[0] == nullptr) return absl::OkStatus();
      RETURN_IF_ERROR(device_->Axpy(n, 1.0f, *share_x0_, *share_x_));
      return Put(*device_, n, *share_x_, *dx[0], accumulate[0]);
    }
    if (dx[0] != nullptr) {
      RETURN_IF_ERROR(Put(*device_, n, *share_x0_, *dx[0], accumulate[0]));
    }
    if (dx[1] != nullptr) {
      RETURN_IF_ERROR(Put(*device_, n, *share_x_, *dx[1], accumulate[1]));
    }
    return absl::OkStatus();
  }

 private:
  // The variables: kernel (or kernel_u, kernel_v), then bias.
  const DeviceArray& W() const { return *arrays_.values[0]; }
  const DeviceArray& U() const { return *arrays_.values[0]; }
  const DeviceArray& V() const { return *arrays_.values[1]; }
  size_t BiasIndex() const { return rank_ == 0 ? 1 : 2; }
  const DeviceArray& Bias() const { return *arrays_.values[BiasIndex()]; }
  DeviceArray& Gradient(size_t v) { return *arrays_.gradients[v]; }

  Device* const device_;
  const int64_t width_, rank_;
  const bool use_bias_;
  const LayerArrays arrays_;
  std::shared_ptr<DeviceArray> u_, du_, share_x_, share_x0_, v_, dv_;
};

absl::StatusOr<Arrays> AllocateAll(Device* device,
                                   const std::vector<int64_t>& sizes) {
  Arrays arrays;
  for (int64_t size : sizes) {
    ASSIGN_OR_RETURN(auto array, device->Allocate(std::max<int64_t>(size, 1)));
    arrays.push_back(std::move(array));
  }
  return arrays;
}

// Scratch floats per example of each kind (the memory estimate counts the
// same): see each kernel's arrays above.
std::vector<int64_t> ScratchPerExample(const GraphNode& node) {
  const int64_t f = node.fields, d = node.width;
  switch (node.kind) {
    case NodeKind::kMultiply:
      return {NumElements(node.output)};
    case NodeKind::kDotInteraction:
      return {f * f, f * f, f * d, node.inputs.size() > 1 ? f * d : 0};
    case NodeKind::kFactorizationMachine:  // ones (sized apart), S, S^2,
                                           // two [F d] temporaries, sum x^2
      return {0, d, d, f * d, f * d, 1, node.inputs.size() > 1 ? f * d : 0};
    case NodeKind::kCross: {
      const int64_t w = node.output[0], r = node.projection_dim;
      return {w, w, w, w, r, r};
    }
    case NodeKind::kLayer:
      return {node.layer->ScratchFloatsPerExample()};
    default:
      return {};
  }
}

std::vector<int64_t> Times(std::vector<int64_t> sizes, int64_t batch) {
  for (int64_t& s : sizes) s *= batch;
  return sizes;
}

}  // namespace

int64_t NodeScratchFloatsPerExample(const GraphNode& node) {
  int64_t total = 0;
  for (int64_t s : ScratchPerExample(node)) total += s;
  return total;
}

int64_t NodeScratchCapFloats(const GraphNode& node) {
  return node.kind == NodeKind::kLayer ? node.layer->ScratchCapFloats() : 0;
}

int64_t NodeScratchFloatsFixed(const GraphNode& node) {
  return node.kind == NodeKind::kLayer ? node.layer->ScratchFloatsFixed() : 0;
}

int64_t NodeScratchFloatsPerThread(const GraphNode& node) {
  return node.kind == NodeKind::kLayer ? node.layer->ScratchFloatsPerThread()
                                       : 0;
}

absl::StatusOr<std::unique_ptr<NodeKernel>> InstantiateNode(
    const GraphNode& node, Device* device, int64_t max_batch,
    const LayerArrays& arrays) {
  const std::vector<int64_t> scratch = ScratchPerExample(node);
  switch (node.kind) {
    case NodeKind::kLayer: {
      ASSIGN_OR_RETURN(std::unique_ptr<LayerKernel> kernel,
                       node.layer->Instantiate(device, max_batch, arrays));
      return std::make_unique<LayerNodeKernel>(
          device, max_batch, NumElements(node.input_shapes[0]),
          std::move(kernel));
    }
    case NodeKind::kConcatenate:
      return std::make_unique<ConcatenateKernel>(device, node);
    case NodeKind::kAdd:
      return std::make_unique<AddKernel>(device, NumElements(node.output));
    case NodeKind::kMultiply: {
      ASSIGN_OR_RETURN(Arrays a,
                       AllocateAll(device, Times(scratch, max_batch)));
      return std::make_unique<MultiplyKernel>(device, NumElements(node.output),
                                              a[0]);
    }
    case NodeKind::kDotInteraction: {
      ASSIGN_OR_RETURN(Arrays a,
                       AllocateAll(device, Times(scratch, max_batch)));
      return std::make_unique<DotInteractionKernel>(
          device, node, Fields(device, node, a[3]), a);
    }
    case NodeKind::kFactorizationMachine: {
      std::vector<int64_t> sizes = Times(scratch, max_batch);
      // The ones vector serves every product: [F], [d], [F x d] and
      // [1 x F d] all fit in F * d + F + d ones.
      sizes[0] = node.fields * node.width + node.fields + node.width;
      ASSIGN_OR_RETURN(Arrays a, AllocateAll(device, sizes));
      RETURN_IF_ERROR(device->Upload(
          std::vector<float>(static_cast<size_t>(sizes[0]), 1.0f), *a[0]));
      return std::make_unique<FactorizationMachineKernel>(
          device, Fields(device, node, a[6]), a);
    }
    case NodeKind::kCross: {
      if (arrays.values.size() != node.variables.size() ||
          arrays.gradients.size() != node.variables.size()) {
        return absl::InternalError(
            absl::StrCat("cross ", node.name, ": variable arrays missing"));
      }
      ASSIGN_OR_RETURN(Arrays a,
                       AllocateAll(device, Times(scratch, max_batch)));
      return std::make_unique<CrossKernel>(device, node, arrays, a);
    }
  }
  return absl::InternalError("unknown node kind");
}

}  // namespace psflow
