#include "model/device/cuda/cuda_device.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/device/cuda/activation_kernels.h"
#include "model/device/cuda/batch_norm_kernels.h"
#include "model/device/cuda/cuda_array.h"
#include "model/device/cuda/cuda_resources.h"
#include "model/device/cuda/cuda_status.h"
#include "model/device/cuda/elementwise_kernels.h"
#include "model/device/cuda/reduction_kernels.h"
#include "model/device/cuda/row_major_gemm.h"
#include "model/device/cuda/softmax_kernels.h"
#include "model/device/cuda/window_kernels.h"
#include "model/device/device_checks.h"

namespace psflow::cuda {
namespace {

KernelActivation ToKernel(Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return KernelActivation::kRelu;
    case Activation::kTanh:
      return KernelActivation::kTanh;
    case Activation::kSigmoid:
      return KernelActivation::kSigmoid;
    case Activation::kNone:
      break;
  }
  return KernelActivation::kNone;
}

KernelPool ToKernel(PoolKind kind) {
  return kind == PoolKind::kMax ? KernelPool::kMax : KernelPool::kAverage;
}

KernelWindow ToKernel(const WindowGeometry& g) {
  return KernelWindow{g.n,  g.h,  g.w,       g.c,        g.kh, g.kw,
                      g.sh, g.sw, g.pad_top, g.pad_left, g.oh, g.ow};
}

// A nullable array's device pointer.
float* DataOrNull(CudaArray* array) {
  return array != nullptr ? array->data() : nullptr;
}

// Softmax calls whose label check can wait for the next synchronization;
// one more forces a synchronization first.
constexpr int kLabelCheckSlots = 16;

class CudaDevice final : public Device {
 public:
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(
      const CudaBackendOptions& options) {
    RETURN_IF_CUDA_ERROR(cudaSetDevice(options.ordinal), "cudaSetDevice");
    cudaDeviceProp prop;
    RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&prop, options.ordinal),
                         "cudaGetDeviceProperties");
    std::unique_ptr<CudaDevice> device(new CudaDevice(options.ordinal));
    device->description_ = absl::StrFormat(
        "cuda:%d (%s, sm_%d%d, %.1f GiB, %d SMs; cuBLAS %s)", options.ordinal,
        prop.name, prop.major, prop.minor,
        prop.totalGlobalMem / (1024.0 * 1024 * 1024), prop.multiProcessorCount,
        options.allow_tf32 ? "TF32" : "float32");
    ASSIGN_OR_RETURN(device->compute_, CreateStream());
    ASSIGN_OR_RETURN(device->upload_, CreateStream());
    ASSIGN_OR_RETURN(device->download_, CreateStream());
    ASSIGN_OR_RETURN(device->compute_mark_, CreateEvent());
    ASSIGN_OR_RETURN(device->cublas_, CreateCublasHandle(device->compute_.get(),
                                                         options.allow_tf32));
    ASSIGN_OR_RETURN(device->bad_label_,
                     AllocateDeviceMemory(sizeof(unsigned long long)));
    ASSIGN_OR_RETURN(device->label_slots_,
                     AllocatePinnedMemory(kLabelCheckSlots * sizeof(uint64_t)));
    return device;
  }

  ~CudaDevice() override {
    // Nothing may still run on the streams when they and the arrays'
    // memory go; errors here were reported by earlier calls.
    if (cudaSetDevice(ordinal_) != cudaSuccess) return;
    for (cudaStream_t s : {upload_.get(), compute_.get(), download_.get()}) {
      if (s != nullptr) (void)cudaStreamSynchronize(s);
    }
  }

  std::string Describe() const override { return description_; }
  DeviceKind kind() const override { return DeviceKind::kCuda; }

  absl::StatusOr<std::shared_ptr<DeviceArray>> Allocate(int64_t size) override {
    RETURN_IF_ERROR(CheckAllocation(size));
    RETURN_IF_ERROR(Enter());
    const size_t bytes = static_cast<size_t>(size) * sizeof(float);
    ASSIGN_OR_RETURN(DeviceMemory memory, AllocateDeviceMemory(bytes));
    ASSIGN_OR_RETURN(Event event, CreateEvent());
    RETURN_IF_CUDA_ERROR(
        cudaMemsetAsync(memory.get(), 0, bytes, compute_.get()),
        "cudaMemsetAsync (zero-fill)");
    ++compute_epoch_;
    return std::make_shared<CudaArray>(this, std::move(memory), size,
                                       std::move(event));
  }

  absl::StatusOr<std::shared_ptr<HostBuffer>> AllocateHost(
      int64_t size) override {
    RETURN_IF_ERROR(CheckAllocation(size));
    RETURN_IF_ERROR(Enter());
    ASSIGN_OR_RETURN(PinnedMemory memory,
                     AllocatePinnedMemory(size * sizeof(float)));
    return std::make_shared<PinnedHostBuffer>(std::move(memory), size);
  }

  absl::Status Upload(absl::Span<const float> host, DeviceArray& dst) override {
    RETURN_IF_ERROR(CheckTransfer("upload", host.size(), dst));
    RETURN_IF_ERROR(Enter());
    ASSIGN_OR_RETURN(CudaArray * array, Own(dst));
    if (host.empty()) return absl::OkStatus();
    RETURN_IF_ERROR(OrderCopy(upload_.get(), upload_waited_, *array));
    // From pageable memory the runtime stages the data before returning,
    // so the caller may reuse it at once; page-locked memory is read by DMA
    // later (device.h states the rule).
    RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(array->data(), host.data(), host.size() * sizeof(float),
                        cudaMemcpyHostToDevice, upload_.get()),
        "cudaMemcpyAsync (upload)");
    return RecordCopy(*array, upload_.get());
  }

  absl::Status DownloadAsync(const DeviceArray& src,
                             absl::Span<float> host) override {
    RETURN_IF_ERROR(CheckTransfer("download", host.size(), src));
    RETURN_IF_ERROR(Enter());
    ASSIGN_OR_RETURN(CudaArray * array, Own(src));
    if (host.empty()) return absl::OkStatus();
    RETURN_IF_ERROR(OrderCopy(download_.get(), download_waited_, *array));
    RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(host.data(), array->data(), host.size() * sizeof(float),
                        cudaMemcpyDeviceToHost, download_.get()),
        "cudaMemcpyAsync (download)");
    // Later compute that writes the array must wait for this read.
    return RecordCopy(*array, download_.get());
  }

  absl::Status Download(const DeviceArray& src,
                        absl::Span<float> host) override {
    // Nothing to copy: nothing to wait for (and no synchronization that
    // would make the label check below meaningful).
    if (host.empty()) return CheckTransfer("download", 0, src);
    RETURN_IF_ERROR(DownloadAsync(src, host));
    // The download stream waited for all compute issued before the copy.
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(download_.get()),
                         "cudaStreamSynchronize (download)");
    return CheckLabels();
  }

  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    float alpha, const DeviceArray& a, const DeviceArray& b,
                    float beta, DeviceArray& c) override {
    RETURN_IF_ERROR(CheckGemm(m, n, k, a, b, c));
    RETURN_IF_ERROR(Enter());
    ASSIGN_OR_RETURN(CudaArray * da, Own(a));
    ASSIGN_OR_RETURN(CudaArray * db, Own(b));
    ASSIGN_OR_RETURN(CudaArray * dc, Own(c));
    RETURN_IF_ERROR(ComputeUses({da, db, dc}));
    ++compute_epoch_;
    return RowMajorSgemm(cublas_.get(), trans_a, trans_b, m, n, k, alpha,
                         da->data(), db->data(), beta, dc->data());
  }

  absl::Status BiasActivation(int64_t rows, int64_t cols,
                              const DeviceArray& bias, Activation activation,
                              DeviceArray& z) override {
    RETURN_IF_ERROR(CheckBiasActivation(rows, cols, bias, z));
    RETURN_IF_ERROR(Enter());
    ASSIGN_OR_RETURN(CudaArray * db, Own(bias));
    ASSIGN_OR_RETURN(CudaArray * dz, Own(z));
    RETURN_IF_ERROR(ComputeUses({db, dz}));
    ++compute_epoch_;
    RETURN_IF_CUDA_ERROR(
        LaunchBiasActivation(rows, cols, db->data(), ToKernel(activation),
                             dz->data(), compute_.get()),
        "bias+activation kernel launch");
    return absl::OkStatus();
  }

  absl::Status ActivationBackward(int64_t n, Activation activation,
                                  const DeviceArray& out,
                                  DeviceArray& grad) override {
    RETURN_IF_ERROR(CheckActivationBackward(n, out, grad));
    RETURN_IF_ERROR(Enter());
    ASSIGN_OR_RETURN(CudaArray * dout, Own(out));
    ASSIGN_OR_RETURN(CudaArray * dgrad, Own(grad));
    RETURN_IF_ERROR(ComputeUses({dout, dgrad}));
    ++compute_epoch_;
    RETURN_IF_CUDA_ERROR(
        LaunchActivationBackward(n, ToKernel(activation), dout->data(),
                                 dgrad->data(), compute_.get()),
        "activation backward kernel launch");
    return absl::OkStatus();
  }

  absl::Status ColumnSums(int64_t rows, int64_t cols, const DeviceArray& x,
                          DeviceArray& sums) override {
    RETURN_IF_ERROR(CheckColumnSums(rows, cols, x, sums));
    RETURN_IF_ERROR(Enter());
    ASSIGN_OR_RETURN(CudaArray * dx, Own(x));
    ASSIGN_OR_RETURN(CudaArray * dsums, Own(sums));
    RETURN_IF_ERROR(ComputeUses({dx, dsums}));
    ++compute_epoch_;
    RETURN_IF_CUDA_ERROR(
        LaunchColumnSums(rows, cols, dx->data(), dsums->data(), compute_.get()),
        "column sums kernel launch");
    return absl::OkStatus();
  }

  absl::Status SoftmaxCrossEntropy(int64_t rows, int64_t classes,
                                   const DeviceArray& logits,
                                   const DeviceArray& labels, DeviceArray* grad,
                                   DeviceArray& predictions,
                                   DeviceArray& stats) override {
    RETURN_IF_ERROR(CheckSoftmaxCrossEntropy(rows, classes, logits, labels,
                                             grad, predictions, stats));
    if (rows > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "softmax cross-entropy: ", rows, " rows; at most 2^31 - 1"));
    }
    RETURN_IF_ERROR(Enter());
    ASSIGN_OR_RETURN(CudaArray * dlogits, Own(logits));
    ASSIGN_OR_RETURN(CudaArray * dlabels, Own(labels));
    ASSIGN_OR_RETURN(CudaArray * dpred, Own(predictions));
    ASSIGN_OR_RETURN(CudaArray * dstats, Own(stats));
    CudaArray* dgrad = nullptr;
    if (grad != nullptr) {
      ASSIGN_OR_RETURN(dgrad, Own(*grad));
    }
    if (pending_label_checks_ == kLabelCheckSlots) {
      RETURN_IF_ERROR(Synchronize());
    }
    RETURN_IF_ERROR(EnsureScratch(2 * rows));
    RETURN_IF_ERROR(ComputeUses({dlogits, dlabels, dpred, dstats, dgrad}));
    ++compute_epoch_;
    cudaStream_t stream = compute_.get();
    auto* bad_label = static_cast<unsigned long long*>(bad_label_.get());
    RETURN_IF_CUDA_ERROR(
        cudaMemsetAsync(bad_label, 0xff, sizeof(*bad_label), stream),
        "cudaMemsetAsync (label check)");
    RETURN_IF_CUDA_ERROR(
        LaunchSoftmaxCrossEntropy(
            rows, classes, dlogits->data(), dlabels->data(),
            dgrad == nullptr ? nullptr : dgrad->data(), dpred->data(),
            dstats->data(), static_cast<float*>(scratch_.get()), bad_label,
            stream),
        "softmax cross-entropy kernel launch");
    uint64_t* slot =
        static_cast<uint64_t*>(label_slots_.get()) + pending_label_checks_;
    RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(slot, bad_label, sizeof(*slot),
                                         cudaMemcpyDeviceToHost, stream),
                         "cudaMemcpyAsync (label check)");
    label_check_classes_[pending_label_checks_++] = classes;
    return absl::OkStatus();
  }

  absl::Status Activate(int64_t n, Activation activation, const DeviceArray& x,
                        DeviceArray& y) override {
    RETURN_IF_ERROR(CheckElementwise("activate", n, {&x, &y}));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&x, &y));
    auto [dx, dy] = arrays;
    return FromCuda(LaunchActivate(n, ToKernel(activation), dx->data(),
                                   dy->data(), compute_.get()),
                    "activate kernel launch");
  }

  absl::Status ScaleShift(int64_t n, float scale, float offset,
                          const DeviceArray& x, DeviceArray& y) override {
    RETURN_IF_ERROR(CheckElementwise("scale+shift", n, {&x, &y}));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&x, &y));
    auto [dx, dy] = arrays;
    return FromCuda(LaunchScaleShift(n, scale, offset, dx->data(), dy->data(),
                                     compute_.get()),
                    "scale+shift kernel launch");
  }

  absl::Status Axpy(int64_t n, float alpha, const DeviceArray& x,
                    DeviceArray& y) override {
    RETURN_IF_ERROR(CheckElementwise("axpy", n, {&x, &y}));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&x, &y));
    auto [dx, dy] = arrays;
    return FromCuda(
        LaunchAxpy(n, alpha, dx->data(), dy->data(), compute_.get()),
        "axpy kernel launch");
  }

  absl::Status CopyBlock(int64_t rows, int64_t cols, const DeviceArray& src,
                         int64_t src_offset, int64_t src_stride,
                         DeviceArray& dst, int64_t dst_offset,
                         int64_t dst_stride, bool accumulate) override {
    RETURN_IF_ERROR(CheckCopyBlock(rows, cols, src, src_offset, src_stride, dst,
                                   dst_offset, dst_stride));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&src, &dst));
    auto [dsrc, ddst] = arrays;
    return FromCuda(LaunchCopyBlock(rows, cols, dsrc->data() + src_offset,
                                    src_stride, ddst->data() + dst_offset,
                                    dst_stride, accumulate, compute_.get()),
                    "copy block kernel launch");
  }

  absl::Status BatchedGemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                           int64_t k, float alpha, const DeviceArray& a,
                           int64_t stride_a, const DeviceArray& b,
                           int64_t stride_b, float beta, DeviceArray& c,
                           int64_t stride_c, int64_t batch) override {
    RETURN_IF_ERROR(CheckBatchedGemm(m, n, k, a, stride_a, b, stride_b, c,
                                     stride_c, batch));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&a, &b, &c));
    auto [da, db, dc] = arrays;
    return RowMajorSgemmStridedBatched(
        cublas_.get(), trans_a, trans_b, m, n, k, alpha, da->data(), stride_a,
        db->data(), stride_b, beta, dc->data(), stride_c, batch);
  }

  absl::Status Multiply(int64_t n, const DeviceArray& a, const DeviceArray& b,
                        DeviceArray& out) override {
    RETURN_IF_ERROR(CheckElementwise("multiply", n, {&a, &b, &out}));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&a, &b, &out));
    auto [da, db, dout] = arrays;
    return FromCuda(
        LaunchMultiply(n, da->data(), db->data(), dout->data(), compute_.get()),
        "multiply kernel launch");
  }

  absl::Status DropoutMask(int64_t n, float rate, uint64_t seed,
                           DeviceArray& mask) override {
    RETURN_IF_ERROR(CheckDropoutMask(n, rate, mask));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&mask));
    return FromCuda(
        LaunchDropoutMask(n, rate, seed, arrays[0]->data(), compute_.get()),
        "dropout mask kernel launch");
  }

  absl::Status Im2Col(const WindowGeometry& g, const DeviceArray& x,
                      DeviceArray& cols) override {
    RETURN_IF_ERROR(CheckWindow("im2col", g, g.input_size(),
                                g.patch_rows() * g.patch_cols(), x, cols));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&x, &cols));
    auto [dx, dcols] = arrays;
    return FromCuda(
        LaunchIm2Col(ToKernel(g), dx->data(), dcols->data(), compute_.get()),
        "im2col kernel launch");
  }

  absl::Status Col2Im(const WindowGeometry& g, const DeviceArray& cols,
                      DeviceArray& x) override {
    RETURN_IF_ERROR(CheckWindow("col2im", g, g.patch_rows() * g.patch_cols(),
                                g.input_size(), cols, x));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&cols, &x));
    auto [dcols, dx] = arrays;
    return FromCuda(
        LaunchCol2Im(ToKernel(g), dcols->data(), dx->data(), compute_.get()),
        "col2im kernel launch");
  }

  absl::Status Pool(PoolKind kind, const WindowGeometry& g,
                    const DeviceArray& x, DeviceArray& y) override {
    RETURN_IF_ERROR(
        CheckWindow("pool", g, g.input_size(), g.output_size(g.c), x, y));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&x, &y));
    auto [dx, dy] = arrays;
    return FromCuda(LaunchPool(ToKernel(kind), ToKernel(g), dx->data(),
                               dy->data(), compute_.get()),
                    "pool kernel launch");
  }

  absl::Status PoolBackward(PoolKind kind, const WindowGeometry& g,
                            const DeviceArray& x, const DeviceArray& y,
                            const DeviceArray& dy, DeviceArray& dx) override {
    RETURN_IF_ERROR(CheckPoolBackward(g, x, y, dy, dx));
    const KernelWindow window = ToKernel(g);
    const int64_t scratch_bytes =
        PoolBackwardScratchBytes(ToKernel(kind), window);
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&x, &y, &dy, &dx));
    constexpr int64_t kFloat = sizeof(float);
    RETURN_IF_ERROR(EnsureScratch((scratch_bytes + kFloat - 1) / kFloat));
    auto [d_x, d_y, d_dy, d_dx] = arrays;
    return FromCuda(LaunchPoolBackward(ToKernel(kind), window, d_x->data(),
                                       d_y->data(), d_dy->data(), d_dx->data(),
                                       scratch_.get(), compute_.get()),
                    "pool backward kernel launch");
  }

  absl::Status ChannelMoments(int64_t rows, int64_t channels,
                              const DeviceArray& x, DeviceArray& mean,
                              DeviceArray& var) override {
    RETURN_IF_ERROR(
        CheckChannelOp("channel moments", rows, channels, {&x}, {&mean, &var}));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&x, &mean, &var));
    RETURN_IF_ERROR(EnsureScratch(BatchNormScratchFloats(rows, channels)));
    auto [dx, dmean, dvar] = arrays;
    return FromCuda(LaunchChannelMoments(
                        rows, channels, dx->data(), dmean->data(), dvar->data(),
                        static_cast<float*>(scratch_.get()), compute_.get()),
                    "channel moments kernel launch");
  }

  absl::Status BatchNormApply(int64_t rows, int64_t channels,
                              const DeviceArray& x, const DeviceArray& mean,
                              const DeviceArray& var, float epsilon,
                              const DeviceArray* gamma, const DeviceArray* beta,
                              DeviceArray& y) override {
    RETURN_IF_ERROR(CheckChannelOp("batch norm", rows, channels, {&x, &y},
                                   {&mean, &var, gamma, beta}));
    ASSIGN_OR_RETURN(auto arrays,
                     BeginCompute(&x, &mean, &var, gamma, beta, &y));
    auto [dx, dmean, dvar, dgamma, dbeta, dy] = arrays;
    return FromCuda(
        LaunchBatchNormApply(rows, channels, dx->data(), dmean->data(),
                             dvar->data(), epsilon, DataOrNull(dgamma),
                             DataOrNull(dbeta), dy->data(), compute_.get()),
        "batch norm kernel launch");
  }

  absl::Status BatchNormBackward(int64_t rows, int64_t channels,
                                 const DeviceArray& x, const DeviceArray& mean,
                                 const DeviceArray& var, float epsilon,
                                 const DeviceArray* gamma,
                                 const DeviceArray& dy, DeviceArray& dx,
                                 DeviceArray* dgamma,
                                 DeviceArray* dbeta) override {
    RETURN_IF_ERROR(CheckChannelOp("batch norm backward", rows, channels,
                                   {&x, &dy, &dx},
                                   {&mean, &var, gamma, dgamma, dbeta}));
    ASSIGN_OR_RETURN(auto arrays, BeginCompute(&x, &mean, &var, gamma, &dy, &dx,
                                               dgamma, dbeta));
    RETURN_IF_ERROR(EnsureScratch(BatchNormScratchFloats(rows, channels)));
    auto [d_x, d_mean, d_var, d_gamma, d_dy, d_dx, d_dgamma, d_dbeta] = arrays;
    return FromCuda(
        LaunchBatchNormBackward(
            rows, channels, d_x->data(), d_mean->data(), d_var->data(), epsilon,
            DataOrNull(d_gamma), d_dy->data(), d_dx->data(),
            DataOrNull(d_dgamma), DataOrNull(d_dbeta),
            static_cast<float*>(scratch_.get()), compute_.get()),
        "batch norm backward kernel launch");
  }

  absl::Status Synchronize() override {
    RETURN_IF_ERROR(Enter());
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(upload_.get()),
                         "cudaStreamSynchronize (upload)");
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(compute_.get()),
                         "cudaStreamSynchronize (compute)");
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(download_.get()),
                         "cudaStreamSynchronize (download)");
    return CheckLabels();
  }

 private:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {}

  // The calling thread may not have this GPU current.
  absl::Status Enter() {
    RETURN_IF_CUDA_ERROR(cudaSetDevice(ordinal_), "cudaSetDevice");
    return absl::OkStatus();
  }

  // The CudaArray behind `array`, which must come from this device.
  absl::StatusOr<CudaArray*> Own(const DeviceArray& array) const {
    const auto* cuda_array = dynamic_cast<const CudaArray*>(&array);
    if (cuda_array == nullptr || cuda_array->owner() != this) {
      return absl::InvalidArgumentError(absl::StrCat(
          "an array passed to ", description_,
          " was not allocated by it; use the device's own Allocate()"));
    }
    // The device owns the array's memory and may write through it.
    return const_cast<CudaArray*>(cuda_array);
  }

  // Makes the compute stream wait for the pending copies of `arrays`
  // (null entries are skipped).
  absl::Status ComputeUses(std::initializer_list<const CudaArray*> arrays) {
    for (const CudaArray* array : arrays) {
      if (array == nullptr || !array->copy_pending()) continue;
      RETURN_IF_CUDA_ERROR(
          cudaStreamWaitEvent(compute_.get(), array->last_copy(), 0),
          "cudaStreamWaitEvent (compute after copy)");
      array->set_copy_pending(false);
    }
    return absl::OkStatus();
  }

  // The prologue of a compute op: makes the device current, resolves the
  // arrays (null ones stay null), orders the compute stream after their
  // pending copies and counts the op for the copies that must follow it.
  template <typename... Arrays>
  absl::StatusOr<std::array<CudaArray*, sizeof...(Arrays)>> BeginCompute(
      const Arrays*... arrays) {
    RETURN_IF_ERROR(Enter());
    const std::array<const DeviceArray*, sizeof...(Arrays)> given{arrays...};
    std::array<CudaArray*, sizeof...(Arrays)> owned{};
    for (size_t i = 0; i < given.size(); ++i) {
      if (given[i] == nullptr) continue;
      ASSIGN_OR_RETURN(owned[i], Own(*given[i]));
      RETURN_IF_ERROR(ComputeUses({owned[i]}));
    }
    ++compute_epoch_;
    return owned;
  }

  // Orders a copy of `array` on `stream` after all compute issued so far
  // and after the array's previous copy. `waited` is the compute epoch that
  // `stream` already waits for: repeated copies with no compute between
  // them cost no extra event traffic.
  absl::Status OrderCopy(cudaStream_t stream, uint64_t& waited,
                         const CudaArray& array) {
    if (marked_epoch_ != compute_epoch_) {
      RETURN_IF_CUDA_ERROR(cudaEventRecord(compute_mark_.get(), compute_.get()),
                           "cudaEventRecord (compute mark)");
      marked_epoch_ = compute_epoch_;
    }
    if (waited != marked_epoch_) {
      RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(stream, compute_mark_.get(), 0),
                           "cudaStreamWaitEvent (copy after compute)");
      waited = marked_epoch_;
    }
    if (array.copy_pending()) {
      RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(stream, array.last_copy(), 0),
                           "cudaStreamWaitEvent (copy after copy)");
    }
    return absl::OkStatus();
  }

  absl::Status RecordCopy(const CudaArray& array, cudaStream_t stream) {
    RETURN_IF_CUDA_ERROR(cudaEventRecord(array.last_copy(), stream),
                         "cudaEventRecord (copy)");
    array.set_copy_pending(true);
    return absl::OkStatus();
  }

  // At least `floats` of scratch: the softmax's per-row terms, batch norm's
  // per-tile sums, max pooling's chosen elements. One buffer for all: the
  // ops run one after another on the compute stream. It only grows.
  absl::Status EnsureScratch(int64_t floats) {
    if (floats <= 0 || (floats <= scratch_floats_ && scratch_ != nullptr)) {
      return absl::OkStatus();
    }
    // Kernels queued earlier may still read the old buffer.
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(compute_.get()),
                         "cudaStreamSynchronize (scratch)");
    scratch_.reset();
    ASSIGN_OR_RETURN(scratch_, AllocateDeviceMemory(floats * sizeof(float)));
    scratch_floats_ = floats;
    return absl::OkStatus();
  }

  // After a synchronization: the first softmax call since the last check
  // that saw a label outside its classes, as InvalidArgument.
  absl::Status CheckLabels() {
    const auto* slots = static_cast<const uint64_t*>(label_slots_.get());
    const int pending = pending_label_checks_;
    pending_label_checks_ = 0;
    for (int i = 0; i < pending; ++i) {
      if (slots[i] == kNoBadLabel) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("label ", BadLabelValue(slots[i]), " of example ",
                       BadLabelRow(slots[i]), " is outside the model's ",
                       label_check_classes_[i], " classes"));
    }
    return absl::OkStatus();
  }

  // Constant after construction.
  const int ordinal_;
  std::string description_;

  Stream compute_, upload_, download_;
  Event compute_mark_;   // recorded on compute_ when a copy must follow it
  CublasHandle cublas_;  // issues on compute_; destroyed before the streams

  // Compute work issued (counter), the count compute_mark_ was recorded at,
  // and the count each copy stream already waits for.
  uint64_t compute_epoch_ = 0, marked_epoch_ = 0;
  uint64_t upload_waited_ = 0, download_waited_ = 0;

  // Label checks: the kernel's error word, one page-locked copy of it per
  // softmax call since the last synchronization, and those calls' classes.
  DeviceMemory bad_label_;
  PinnedMemory label_slots_;
  std::array<int64_t, kLabelCheckSlots> label_check_classes_{};
  int pending_label_checks_ = 0;

  DeviceMemory scratch_;
  int64_t scratch_floats_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(
    const CudaBackendOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device,
                   CudaDevice::Create(options));
  return std::unique_ptr<Device>(std::move(device));
}

}  // namespace psflow::cuda
