// Per-GPU utilization, memory, temperature and power from NVML, the NVIDIA
// driver's management library, loaded at run time (dlopen of
// libnvidia-ml.so.1) as cuBLAS is: binaries start and run on machines
// without a driver, and a GPU worker reports why it has no GPU metrics
// once instead of failing.
//
// NVML's C API is declared here by hand (the few functions and structs we
// use, stable since NVML's v2 entry points), so building needs no driver
// headers. Thread-safe after Open.
#ifndef PSFLOW_COMMON_METRICS_GPU_MONITOR_H_
#define PSFLOW_COMMON_METRICS_GPU_MONITOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/metrics_registry.h"

namespace psflow {

// One reading of one GPU; a field NVML could not read is empty.
struct GpuSample {
  int index = 0;
  std::string name;
  std::optional<double> utilization;  // 0..1, of the last sample period
  std::optional<int64_t> memory_used_bytes;
  std::optional<int64_t> memory_total_bytes;
  std::optional<double> temperature_celsius;
  std::optional<double> power_watts;
};

class GpuMonitor {
 public:
  // Where NVML is looked for: the dynamic loader's search, then the usual
  // driver locations.
  static std::vector<std::string> DefaultLibraries();

  // Loads NVML from the first of `libraries` that opens and initializes
  // it. Unavailable, saying why, when there is no driver or no GPU.
  static absl::StatusOr<std::unique_ptr<GpuMonitor>> Open(
      const std::vector<std::string>& libraries = DefaultLibraries());
  ~GpuMonitor();

  int device_count() const { return static_cast<int>(devices_.size()); }
  // Every GPU, in NVML's order.
  std::vector<GpuSample> Sample() const;

  struct Api;  // the NVML entry points (gpu_monitor.cc)

 private:
  GpuMonitor(std::unique_ptr<Api> api, std::vector<void*> devices,
             std::vector<std::string> names);

  std::unique_ptr<Api> api_;
  std::vector<void*> devices_;  // nvmlDevice_t handles
  std::vector<std::string> names_;
};

// Registers psflow_gpu_* gauges (labelled by `gpu` index) refreshed from
// `monitor` at each scrape; the refreshing stops when the handle goes.
absl::StatusOr<std::unique_ptr<MetricsRegistry::RefresherHandle>>
ExportGpuMetrics(MetricsRegistry* registry, const GpuMonitor* monitor);

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_GPU_MONITOR_H_
