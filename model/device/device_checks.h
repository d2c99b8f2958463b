// Argument checks shared by every Device backend, so that each one rejects
// the same calls with the same messages before touching memory. Each
// returns InvalidArgument naming the op, the sizes it was given and the
// sizes it needed, or OK. Stateless; thread-safe.
#ifndef PSFLOW_MODEL_DEVICE_DEVICE_CHECKS_H_
#define PSFLOW_MODEL_DEVICE_DEVICE_CHECKS_H_

#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "model/device/device.h"

namespace psflow {

absl::Status CheckAllocation(int64_t size);

// `what` is "upload" or "download"; `count` values into or out of `array`.
absl::Status CheckTransfer(const char* what, int64_t count,
                           const DeviceArray& array);

absl::Status CheckGemm(int64_t m, int64_t n, int64_t k, const DeviceArray& a,
                       const DeviceArray& b, const DeviceArray& c);

absl::Status CheckBiasActivation(int64_t rows, int64_t cols,
                                 const DeviceArray& bias, const DeviceArray& z);

absl::Status CheckActivationBackward(int64_t n, const DeviceArray& out,
                                     const DeviceArray& grad);

absl::Status CheckColumnSums(int64_t rows, int64_t cols, const DeviceArray& x,
                             const DeviceArray& sums);

absl::Status CheckSoftmaxCrossEntropy(int64_t rows, int64_t classes,
                                      const DeviceArray& logits,
                                      const DeviceArray& labels,
                                      const DeviceArray* grad,
                                      const DeviceArray& predictions,
                                      const DeviceArray& stats);

// Every elementwise op of n values over the listed arrays.
absl::Status CheckElementwise(const char* op, int64_t n,
                              std::initializer_list<const DeviceArray*> arrays);

absl::Status CheckCopyBlock(int64_t rows, int64_t cols, const DeviceArray& src,
                            int64_t src_offset, int64_t src_stride,
                            const DeviceArray& dst, int64_t dst_offset,
                            int64_t dst_stride);
absl::Status CheckBatchedGemm(int64_t m, int64_t n, int64_t k,
                              const DeviceArray& a, int64_t stride_a,
                              const DeviceArray& b, int64_t stride_b,
                              const DeviceArray& c, int64_t stride_c,
                              int64_t batch);
absl::Status CheckDropoutMask(int64_t n, float rate, const DeviceArray& mask);

// A window geometry that is consistent (positive sizes, output positions
// whose windows start inside the padded image, products that fit int64)
// and arrays that hold `in` input and `out` output values of it.
absl::Status CheckWindow(const char* op, const WindowGeometry& g,
                         int64_t in_values, int64_t out_values,
                         const DeviceArray& in, const DeviceArray& out);

// A convolution (Device::ConvForward / ConvBackward): the window as for
// CheckWindow, filters >= 0, x with g.input_size() values, the kernel and
// `dkernel` (when given) with g.patch_cols() x filters, `out` (y or dy)
// with g.patch_rows() x filters, and `dx` (when given) like x.
absl::Status CheckConv(const char* op, const WindowGeometry& g, int64_t filters,
                       const DeviceArray& x, const DeviceArray& kernel,
                       const DeviceArray& out, const DeviceArray* dkernel,
                       const DeviceArray* dx);

absl::Status CheckPoolBackward(const WindowGeometry& g, const DeviceArray& x,
                               const DeviceArray& y, const DeviceArray& dy,
                               const DeviceArray& dx);

// Batch normalization's per-channel ops over x[rows x channels]; every
// channel array (nullable ones when given) holds `channels` values.
absl::Status CheckChannelOp(
    const char* op, int64_t rows, int64_t channels,
    std::initializer_list<const DeviceArray*> data,
    std::initializer_list<const DeviceArray*> per_channel);

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_DEVICE_CHECKS_H_
