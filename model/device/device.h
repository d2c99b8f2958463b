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

enum class DeviceKind { kCpu, kCuda };

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

  // Waits for queued work; reports asynchronous errors.
  virtual absl::Status Synchronize() = 0;
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_DEVICE_H_
