// Helpers for tests of Device backends: skipping where a device is absent,
// and comparing arrays with a relative bound.
#ifndef PSFLOW_MODEL_DEVICE_DEVICE_TEST_UTIL_H_
#define PSFLOW_MODEL_DEVICE_DEVICE_TEST_UTIL_H_

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

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_DEVICE_TEST_UTIL_H_
