#include "model/device/device_test_util.h"

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace psflow {

bool DeviceAbsent(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsFailedPrecondition(status);
}

bool DeviceRequired() {
  const char* value = std::getenv("PSFLOW_REQUIRE_GPU");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                float relative) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " is NaN";
    ASSERT_NEAR(got[i], want[i], relative * (1 + std::fabs(want[i])))
        << "element " << i;
  }
}

void ExpectSameSum(const std::vector<float>& got,
                   const std::vector<float>& want,
                   const std::vector<float>& magnitude, int64_t terms) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(magnitude.size(), want.size());
  const double scale = 8 * std::sqrt(static_cast<double>(terms)) * FLT_EPSILON;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " is NaN";
    ASSERT_NEAR(got[i], want[i], scale * magnitude[i])
        << "element " << i << " (a sum of " << terms << " terms of total "
        << "magnitude " << magnitude[i] << ")";
  }
}

}  // namespace psflow
