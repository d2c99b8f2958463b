#include "model/initializer.h"

#include <cmath>

#include "common/splitmix64.h"

namespace psflow {
namespace {

// Fan-in and fan-out of a kernel: its first and last dimensions, with the
// dimensions in between (a convolution's window) counted in both, as Keras
// does.
struct Fans {
  double in = 1, out = 1;
};
Fans FansOf(const std::vector<int64_t>& shape) {
  if (shape.empty()) return Fans{};
  if (shape.size() == 1) {
    return Fans{static_cast<double>(shape[0]), static_cast<double>(shape[0])};
  }
  double receptive = 1;
  for (size_t d = 0; d + 2 < shape.size(); ++d) receptive *= shape[d];
  return Fans{receptive * shape[shape.size() - 2], receptive * shape.back()};
}

}  // namespace

std::vector<std::vector<float>> InitialValues(
    const std::vector<ModelVariable>& variables, uint64_t seed) {
  std::vector<std::vector<float>> values;
  uint64_t state = seed ^ 0x5eed5eed5eed5eedull;
  for (const ModelVariable& v : variables) {
    std::vector<float> value(v.num_elements(), 0.0f);
    switch (v.initializer) {
      case Initializer::kZeros:
        break;
      case Initializer::kOnes:
        for (float& x : value) x = 1.0f;
        break;
      case Initializer::kGlorotUniform: {
        const Fans fans = FansOf(v.shape());
        const double limit = std::sqrt(6.0 / (fans.in + fans.out));
        for (float& x : value) {
          const double u =
              (SplitMix64(state) >> 11) * (1.0 / 9007199254740992.0);
          x = static_cast<float>((2 * u - 1) * limit);
        }
        break;
      }
    }
    values.push_back(std::move(value));
  }
  return values;
}

}  // namespace psflow
