// The conformance suite every Device backend passes: each op against a
// plain C++ reference (double accumulation) on fresh random inputs, with
// outputs poisoned (NaN-filled) first so that unwritten elements fail, plus
// argument checks, transfer ordering and host staging buffers.
//
// A backend's test instantiates it:
//
//   INSTANTIATE_TEST_SUITE_P(Cpu, DeviceConformanceTest,
//                            ::testing::Values(DeviceCase{...}),
//                            DeviceCaseName);
//
// Relative error bounds (|got - want| <= bound * (1 + |want|)), stated per
// op in device_conformance.cc; NaN never passes.
#ifndef PSFLOW_MODEL_DEVICE_DEVICE_CONFORMANCE_H_
#define PSFLOW_MODEL_DEVICE_DEVICE_CONFORMANCE_H_

#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "model/device/device.h"
#include "model/device/device_test_util.h"

namespace psflow {

struct DeviceCase {
  std::string name;
  // Unavailable or FailedPrecondition: the device is absent here, and the
  // test skips with the reason (or fails where PSFLOW_REQUIRE_GPU=1 says
  // the machine has one).
  std::function<absl::StatusOr<std::unique_ptr<Device>>()> create;
  // Gemm's relative error bound: 1e-5 for float32 math; TF32 tensor cores
  // round inputs to 10 mantissa bits and need about 1e-2.
  float gemm_tolerance = 1e-5f;
};

std::string DeviceCaseName(const ::testing::TestParamInfo<DeviceCase>& info);

// gtest prints a failing case by name rather than as bytes.
inline void PrintTo(const DeviceCase& c, std::ostream* os) { *os << c.name; }

class DeviceConformanceTest : public ::testing::TestWithParam<DeviceCase> {
 protected:
  void SetUp() override;

  std::vector<float> Random(size_t n, float lo = -1, float hi = 1);
  std::shared_ptr<DeviceArray> On(const std::vector<float>& host);
  // NaN-filled, so that elements an op forgets to write are caught.
  std::shared_ptr<DeviceArray> Poisoned(size_t n);
  std::vector<float> Back(const DeviceArray& array);

  std::unique_ptr<Device> device_;
  std::mt19937 rng_{1234};
};

}  // namespace psflow

#endif  // PSFLOW_MODEL_DEVICE_DEVICE_CONFORMANCE_H_
