// Helpers for tests of Device backends: skipping where a device is absent,
// and comparing arrays with a relative bound.
#ifndef PSFLOW_MODEL_DEVICE_DEVICE_TEST_UTIL_H_
#define PSFLOW_MODEL_DEVICE_DEVICE_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace psflow {

// Skips the calling test when `status` says the device is absent, unless
// the environment sets PSFLOW_REQUIRE_GPU=1 (a GPU machine's test run,
// where skipping would hide a broken installation): then it fails.
#define PSFLOW_SKIP_IF_ABSENT(status)                                 \
  do {                                                                \
    if (::psflow::DeviceAbsent(status)) {                             \
      if (::psflow::DeviceRequired()) {                               \
        FAIL() << "PSFLOW_REQUIRE_GPU=1 but: " << (status).message(); \
      }                                                               \
      GTEST_SKIP() << "no device: " << (status).message();            \
    }                                                                 \
  } while (false)

bool DeviceAbsent(const absl::Status& status);
bool DeviceRequired();

// Asserts |got[i] - want[i]| <= relative * (1 + |want[i]|) for every i;
// NaN never passes.
void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                float relative);

// Asserts |got[i] - want[i]| <= 8 * sqrt(terms) * FLT_EPSILON * magnitude[i]
// for every i, where magnitude[i] is the sum of the absolute values of the
// `terms` values that were added to make element i (for a matrix product,
// (|A| |B|)[i]). Two float32 sums of the same terms in different orders
// differ by rounding alone, which grows like sqrt(terms) * eps * magnitude
// for random signs (eight of those leaves room for unlucky orders, and is
// still far below one wrong or missing term). NaN never passes.
void ExpectSameSum(const std::vector<float>& got,
                   const std::vector<float>& want,
                   const std::vector<float>& magnitude, int64_t terms);

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_DEVICE_TEST_UTIL_H_
