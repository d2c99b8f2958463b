// Argument checks shared by every Device backend, so that each one rejects
// the same calls with the same messages before touching memory. Each
// returns InvalidArgument naming the op, the sizes it was given and the
// sizes it needed, or OK. Stateless; thread-safe.
#ifndef PSFLOW_MODEL_DEVICE_DEVICE_CHECKS_H_
#define PSFLOW_MODEL_DEVICE_DEVICE_CHECKS_H_

#include <cstdint>

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

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_DEVICE_CHECKS_H_
