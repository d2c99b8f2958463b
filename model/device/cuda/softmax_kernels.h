// Softmax cross-entropy with its gradient, argmax predictions and the
// accuracy count, for a batch of logits. Plain C++ interface in front of
// the .cu file; see activation_kernels.h for the conventions.
#ifndef PSFLOW_MODEL_DEVICE_CUDA_SOFTMAX_KERNELS_H_
#define PSFLOW_MODEL_DEVICE_CUDA_SOFTMAX_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// The value LaunchSoftmaxCrossEntropy's error word holds when every label
// was valid; it must be set to this before the launch.
constexpr uint64_t kNoBadLabel = ~uint64_t{0};

// Row `row` of the error word: (row << 32) | bit pattern of its label.
inline int64_t BadLabelRow(uint64_t word) {
  return static_cast<int64_t>(word >> 32);
}
float BadLabelValue(uint64_t word);

// For logits[rows x classes] and labels[rows] (class ids as floats,
// truncated toward zero): predictions[r] = argmax of row r (lowest class
// among ties), grad (when non-null) = d(mean loss)/d(logits), stats[0] =
// summed cross-entropy, stats[1] = rows whose argmax is the label. A label
// outside [0, classes) (or NaN) lowers `*bad_label` to the packed word of
// the smallest such row (see BadLabelRow); that row adds nothing to the
// loss. `scratch` holds 2 * rows floats. Two kernels: one warp per row,
// then one block adding the rows' terms in a fixed order (deterministic).
// Needs rows < 2^31.
cudaError_t LaunchSoftmaxCrossEntropy(int64_t rows, int64_t classes,
                                      const float* logits, const float* labels,
                                      float* grad, float* predictions,
                                      float* stats, float* scratch,
                                      unsigned long long* bad_label,
                                      cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_MODEL_DEVICE_CUDA_SOFTMAX_KERNELS_H_
