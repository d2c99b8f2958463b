// Keras' "valid" and "same" padding turned into a WindowGeometry for
// convolution and pooling layers. Stateless.
#ifndef PSFLOW_MODEL_LAYERS_WINDOW_PLAN_H_
#define PSFLOW_MODEL_LAYERS_WINDOW_PLAN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "model/device/device.h"
#include "model/layers/layer.h"

namespace psflow {

enum class Padding {
  kValid,  // windows inside the image only: out = (in - k) / s + 1
  kSame,   // zero-padded so that out = ceil(in / s); the odd padding row
           // or column goes after the image, as in TensorFlow
};

struct Window2D {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  Padding padding = Padding::kValid;
};

// The geometry of `window` over one h x w x c example (n = 1; kernels set
// n per batch). InvalidArgument, naming the sizes, when a "valid" window is
// larger than the input.
absl::StatusOr<WindowGeometry> PlanWindow(const Shape& input,
                                          const Window2D& window);

}  // namespace psflow

#endif  // PSFLOW_MODEL_LAYERS_WINDOW_PLAN_H_
