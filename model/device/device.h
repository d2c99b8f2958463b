// The compute device a worker trains on, behind one interface: the CPU
// backend (cpu/cpu_device.h) and the CUDA backend implement it, and the
// model (model/) is written against it only.
//
// Arrays live in the device's memory; Upload/Download move them to and
// from host memory. All shapes are row-major. Calls may be asynchronous
// on devices that queue work (CUDA): they return once the work is queued,
// and errors found while it runs (a label outside the classes, a failed
// kernel) are reported by the next Download or Synchronize. Download and
// Synchronize wait for the work queued before them.
//
// Every op checks its arrays' sizes (InvalidArgument), so a wrong shape is
// an error and never an access outside an array. Arrays given to a device
// must come from that device's Allocate.
//
// A Device is used by one thread at a time; arrays and host buffers must
// not outlive it.
#ifndef PSFLOW_MODEL_DEVICE_DEVICE_H_
#define PSFLOW_MODEL_DEVICE_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace psflow {

enum class Activation { kNone, kRelu, kTanh, kSigmoid };

// Keras' name of an activation, for logs: "linear", "relu", ...
const char* ActivationName(Activation activation);

enum class DeviceKind { kCpu, kCuda };

enum class PoolKind { kMax, kAverage };

// A 2-D window sliding over a batch of NHWC images: n images of h x w x c,
// a kh x kw window moved by (sh, sw), with pad_top/pad_left implicit zero
// (or, for pooling, absent) rows/columns before the image, giving oh x ow
// output positions. Convolutions (via Im2Col/Col2Im) and pooling share it;
// ConvGeometry::Create computes the output size and padding for Keras'
// "valid" and "same" modes (model/layers/conv_geometry.h).
struct WindowGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0;
  int64_t kh = 0, kw = 0;
  int64_t sh = 1, sw = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t oh = 0, ow = 0;

  int64_t input_size() const { return n * h * w * c; }
  // One row per output position, one column per window element.
  int64_t patch_rows() const { return n * oh * ow; }
  int64_t patch_cols() const { return kh * kw * c; }
  int64_t output_size(int64_t channels) const { return n * oh * ow * channels; }
};

// The largest patch matrix, in floats, that the CPU backend builds whole
// for a convolution (2 MiB); larger ones it builds a few images at a time
// in cache-sized buffers of its own (model/device/cpu/cpu_conv.h), so a
// convolution's `cols` and `dcols` scratch on the CPU never needs more.
inline constexpr int64_t kCpuWholeConvolutionFloats = 512 * 1024;
// The floats of one such group of images' patches aimed for (512 KiB),
// held by each of the backend's threads (with its gradient): at least one
// whole image's patches, however large.
inline constexpr int64_t kCpuConvolutionGroupFloats = 128 * 1024;
// The most partial sums of a kernel's gradient the CPU backend keeps while
// it builds the patches a group at a time (each the kernel's size).
inline constexpr int64_t kCpuConvolutionMaxPartials = 8;

// A float array in a device's memory; freed when the last reference goes.
class DeviceArray {
 public:
  virtual ~DeviceArray() = default;
  virtual float* data() = 0;              // a device pointer
  virtual const float* data() const = 0;  // a device pointer
  virtual int64_t size() const = 0;
};

// Host memory for staging a device's transfers (Device::AllocateHost):
// page-locked on CUDA so copies run at full speed without blocking the
// caller, ordinary memory elsewhere. Freed when the last reference goes.
class HostBuffer {
 public:
  virtual ~HostBuffer() = default;
  virtual absl::Span<float> span() = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  // For logs: "cpu (OpenBLAS, 1 thread)", "cuda:0 (NVIDIA H100 ...)".
  virtual std::string Describe() const = 0;

  virtual DeviceKind kind() const = 0;

  // Whether the device computes on ordinary host memory, so that an array
  // may stand for the caller's host memory without a copy
  // (model/device/bindable_array.h). The CPU backend does; CUDA does not.
  virtual bool computes_on_host_memory() const { return false; }

  // `size` floats, zero-filled. ResourceExhausted when memory runs out.
  virtual absl::StatusOr<std::shared_ptr<DeviceArray>> Allocate(
      int64_t size) = 0;

  // `size` zero-filled floats of host memory that this device copies to
  // and from fastest. The default is ordinary heap memory; the CUDA backend
  // gives page-locked memory. ResourceExhausted when memory runs out.
  virtual absl::StatusOr<std::shared_ptr<HostBuffer>> AllocateHost(
      int64_t size);

  // Copies host.size() values between the host and the start of a device
  // array (at most its size; arrays are sized for the largest batch).
  //
  // Upload may return before the copy ends. Ordinary host memory may be
  // reused as soon as it returns; memory from AllocateHost must not be
  // written until the next Download or Synchronize (the copy reads it
  // asynchronously).
  virtual absl::Status Upload(absl::Span<const float> host,
                              DeviceArray& dst) = 0;
  // Returns once `host` holds the values.
  virtual absl::Status Download(const DeviceArray& src,
                                absl::Span<float> host) = 0;
  // Like Download, but may return before the copy ends: `host` holds the
  // values after the next Synchronize() returns OK, and must stay valid
  // until then. Lets a device overlap the copy with later work (the CUDA
  // backend does, into memory from AllocateHost). The default downloads at
  // once.
  virtual absl::Status DownloadAsync(const DeviceArray& src,
                                     absl::Span<float> host) {
    return Download(src, host);
  }

  // C[m x n] = alpha * op(A) * op(B) + beta * C, where op(A) is m x k
  // (A stored k x m when trans_a) and op(B) is k x n (B stored n x k when
  // trans_b).
  virtual absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                            int64_t k, float alpha, const DeviceArray& a,
                            const DeviceArray& b, float beta,
                            DeviceArray& c) = 0;

  // In place on z[rows x cols]: z = act(z + bias) with bias[cols].
  virtual absl::Status BiasActivation(int64_t rows, int64_t cols,
                                      const DeviceArray& bias,
                                      Activation activation,
                                      DeviceArray& z) = 0;

  // In place on grad[n]: grad *= act'(.), with act' written in terms of
  // the activation's output `out[n]`.
  virtual absl::Status ActivationBackward(int64_t n, Activation activation,
                                          const DeviceArray& out,
                                          DeviceArray& grad) = 0;

  // sums[cols] = sum over rows of x[rows x cols].
  virtual absl::Status ColumnSums(int64_t rows, int64_t cols,
                                  const DeviceArray& x, DeviceArray& sums) = 0;

  // For logits[rows x classes] and labels[rows] (class ids stored as
  // floats, truncated toward zero): writes the summed cross-entropy of the
  // softmax and the number of rows whose argmax equals the label into
  // stats[0] and stats[1], the argmax of each row (the lowest class among
  // ties) into predictions[rows], and, when `grad` is non-null,
  // d(mean loss)/d(logits) into grad[rows x classes]. A label outside
  // [0, classes) is InvalidArgument naming the first such example, from
  // this call or (devices that queue work) the next Download/Synchronize.
  virtual absl::Status SoftmaxCrossEntropy(int64_t rows, int64_t classes,
                                           const DeviceArray& logits,
                                           const DeviceArray& labels,
                                           DeviceArray* grad,
                                           DeviceArray& predictions,
                                           DeviceArray& stats) = 0;

  // --- Layer ops (convolutional networks). Arrays are NHWC; a
  // "channels" dimension is innermost, so an NHWC tensor is a
  // [rows x channels] matrix with rows = n * h * w.

  // y[n] = act(x[n]); y may be x.
  virtual absl::Status Activate(int64_t n, Activation activation,
                                const DeviceArray& x, DeviceArray& y) = 0;

  // y[n] = scale * x[n] + offset; y may be x.
  virtual absl::Status ScaleShift(int64_t n, float scale, float offset,
                                  const DeviceArray& x, DeviceArray& y) = 0;

  // out[n] = a[n] * b[n]; out may be a or b.
  virtual absl::Status Multiply(int64_t n, const DeviceArray& a,
                                const DeviceArray& b, DeviceArray& out) = 0;

  // mask[n] = 0 with probability `rate`, else 1 / (1 - rate), drawn from
  // a counter-based generator: element i's value depends only on (seed,
  // i), identically on every backend. 0 <= rate < 1.
  virtual absl::Status DropoutMask(int64_t n, float rate, uint64_t seed,
                                   DeviceArray& mask) = 0;

  // cols[g.patch_rows() x g.patch_cols()]: row (img, oy, ox) holds the
  // window at that output position, in (ky, kx, channel) order, with zeros
  // where it overlaps the padding; from x[g.input_size()].
  virtual absl::Status Im2Col(const WindowGeometry& g, const DeviceArray& x,
                              DeviceArray& cols) = 0;

  // The adjoint of Im2Col: x[g.input_size()] = the sum, over every window
  // element that reads each input value, of that element of cols
  // (padding's share dropped). Overwrites x.
  virtual absl::Status Col2Im(const WindowGeometry& g, const DeviceArray& cols,
                              DeviceArray& x) = 0;

  // Floats of the `cols` (and `dcols`) scratch that ConvForward and
  // ConvBackward need for every batch of up to g.n images of `g`: the
  // whole patch matrix, g.patch_rows() x g.patch_cols(), by default; the
  // CPU backend builds large patch matrices a group of images at a time in
  // buffers of its own and needs only the largest it takes whole.
  virtual int64_t ConvScratchFloats(const WindowGeometry& g) const {
    return g.patch_rows() * g.patch_cols();
  }

  // A convolution's product: y[g.patch_rows() x filters] = cols(x) *
  // kernel, kernel being g.patch_cols() x filters and cols(x) Im2Col's
  // patch matrix. `cols` (ConvScratchFloats(g) floats, or more) is the
  // backend's scratch, handed unchanged to the ConvBackward of the same x:
  // the default builds the whole patch matrix there and multiplies once;
  // the CPU backend builds and multiplies the patches of a few images at a
  // time in cache-sized buffers of its own, so they never travel to memory
  // (bench/RESULTS.md, "Convolutions a few images at a time"). A backend
  // may take either way per call; its ConvBackward takes the same.
  virtual absl::Status ConvForward(const WindowGeometry& g, int64_t filters,
                                   const DeviceArray& x,
                                   const DeviceArray& kernel, DeviceArray& cols,
                                   DeviceArray& y);

  // Its backward pass: dkernel[g.patch_cols() x filters] = cols(x)^T dy
  // and, unless dx is null, dx[g.input_size()] = Col2Im(dy kernel^T), for
  // dy[g.patch_rows() x filters]. `cols` is what ConvForward left in it;
  // `dcols` is scratch of the same size. Scratch too small for a batch
  // the backend takes whole is an InvalidArgument error.
  virtual absl::Status ConvBackward(const WindowGeometry& g, int64_t filters,
                                    const DeviceArray& x, const DeviceArray& dy,
                                    const DeviceArray& kernel,
                                    const DeviceArray& cols, DeviceArray& dcols,
                                    DeviceArray& dkernel, DeviceArray* dx);

  // y[g.output_size(g.c)]: the max, or the mean over the window's elements
  // inside the image (padding is not counted, as in Keras), of each window.
  virtual absl::Status Pool(PoolKind kind, const WindowGeometry& g,
                            const DeviceArray& x, DeviceArray& y) = 0;

  // dx[g.input_size()] (overwritten) from dy[g.output_size(g.c)]: max
  // routes each window's gradient to its first maximal element (found from
  // x and y); average spreads it evenly over the window's counted elements.
  virtual absl::Status PoolBackward(PoolKind kind, const WindowGeometry& g,
                                    const DeviceArray& x, const DeviceArray& y,
                                    const DeviceArray& dy, DeviceArray& dx) = 0;

  // Per channel c of x[rows x channels]: mean[c] and the biased variance
  // var[c] over the rows (what batch normalization normalizes with).
  virtual absl::Status ChannelMoments(int64_t rows, int64_t channels,
                                      const DeviceArray& x, DeviceArray& mean,
                                      DeviceArray& var) = 0;

  // y = gamma * (x - mean) / sqrt(var + epsilon) + beta per channel, over
  // x[rows x channels]; gamma and beta may be null (1 and 0). y may be x.
  virtual absl::Status BatchNormApply(
      int64_t rows, int64_t channels, const DeviceArray& x,
      const DeviceArray& mean, const DeviceArray& var, float epsilon,
      const DeviceArray* gamma, const DeviceArray* beta, DeviceArray& y) = 0;

  // Backward of BatchNormApply in training mode (mean and var are x's own
  // ChannelMoments): from dy, writes dx (which may be dy) and, when
  // non-null, dgamma[c] = sum dy * x_hat and dbeta[c] = sum dy.
  virtual absl::Status BatchNormBackward(
      int64_t rows, int64_t channels, const DeviceArray& x,
      const DeviceArray& mean, const DeviceArray& var, float epsilon,
      const DeviceArray* gamma, const DeviceArray& dy, DeviceArray& dx,
      DeviceArray* dgamma, DeviceArray* dbeta) = 0;

  // --- Graph ops (model graphs, model/graph/): joining, splitting and
  // combining the values of several nodes.

  // y[n] += alpha * x[n]. x and y must not overlap.
  virtual absl::Status Axpy(int64_t n, float alpha, const DeviceArray& x,
                            DeviceArray& y) = 0;

  // A block of `rows` x `cols` values: for each row r,
  // dst[dst_offset + r * dst_stride + j] (+)= src[src_offset +
  // r * src_stride + j], j < cols; added to what dst holds when
  // `accumulate`. Source and destination blocks must not overlap.
  virtual absl::Status CopyBlock(int64_t rows, int64_t cols,
                                 const DeviceArray& src, int64_t src_offset,
                                 int64_t src_stride, DeviceArray& dst,
                                 int64_t dst_offset, int64_t dst_stride,
                                 bool accumulate) = 0;

  // `batch` independent Gemms (the Gemm conventions): C_i = alpha *
  // op(A_i) * op(B_i) + beta * C_i, where X_i starts at X + i * stride_x.
  // A stride of 0 uses one matrix for every product (A and B only).
  virtual absl::Status BatchedGemm(bool trans_a, bool trans_b, int64_t m,
                                   int64_t n, int64_t k, float alpha,
                                   const DeviceArray& a, int64_t stride_a,
                                   const DeviceArray& b, int64_t stride_b,
                                   float beta, DeviceArray& c, int64_t stride_c,
                                   int64_t batch) = 0;

  // Waits for queued work; reports asynchronous errors.
  virtual absl::Status Synchronize() = 0;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_DEVICE_H_
