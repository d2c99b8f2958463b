#include "common/metrics/gpu_monitor.h"

#include <dlfcn.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

// NVML's C types, as its API documents them.
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
constexpr NvmlReturn kNvmlSuccess = 0;
using NvmlDevice = void*;  // nvmlDevice_t, an opaque handle
struct NvmlUtilization {   // nvmlUtilization_t
  unsigned int gpu;        // percent of time a kernel ran
  unsigned int memory;     // percent of time memory was read or written
};
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr unsigned int kNameLength = 96;

}  // namespace

struct GpuMonitor::Api {
  void* library = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*device_count)(unsigned int*) = nullptr;
  NvmlReturn (*device_by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned int*) = nullptr;  // milliwatts

  std::string Error(NvmlReturn code) const {
    const char* text = error_string != nullptr ? error_string(code) : nullptr;
    return text != nullptr ? text : absl::StrCat("NVML error ", code);
  }
};

std::vector<std::string> GpuMonitor::DefaultLibraries() {
  return {"libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
          "/usr/lib64/libnvidia-ml.so.1",
          "/usr/local/nvidia/lib64/libnvidia-ml.so.1"};
}

absl::StatusOr<std::unique_ptr<GpuMonitor>> GpuMonitor::Open(
    const std::vector<std::string>& libraries) {
  auto api = std::make_unique<Api>();
  std::vector<std::string> errors;
  for (const std::string& name : libraries) {
    api->library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->library != nullptr) break;
    const char* error = dlerror();
    errors.push_back(error != nullptr ? error : name);
  }
  if (api->library == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("NVML (libnvidia-ml.so.1, part of the NVIDIA driver) "
                     "could not be loaded: ",
                     absl::StrJoin(errors, "; ")));
  }
  std::vector<std::string> missing;
  auto bind = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        dlsym(api->library, symbol));
    if (fn == nullptr) missing.push_back(symbol);
  };
  bind(api->init, "nvmlInit_v2");
  bind(api->shutdown, "nvmlShutdown");
  bind(api->error_string, "nvmlErrorString");
  bind(api->device_count, "nvmlDeviceGetCount_v2");
  bind(api->device_by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(api->name, "nvmlDeviceGetName");
  bind(api->utilization, "nvmlDeviceGetUtilizationRates");
  bind(api->memory, "nvmlDeviceGetMemoryInfo");
  bind(api->temperature, "nvmlDeviceGetTemperature");
  bind(api->power, "nvmlDeviceGetPowerUsage");
  if (!missing.empty()) {
    dlclose(api->library);
    return absl::UnavailableError(
        absl::StrCat("the loaded NVML lacks ", absl::StrJoin(missing, ", "),
                     "; the NVIDIA driver is too old for GPU metrics"));
  }
  if (NvmlReturn r = api->init(); r != kNvmlSuccess) {
    const std::string why = api->Error(r);
    dlclose(api->library);
    return absl::UnavailableError(
        absl::StrCat("NVML did not initialize: ", why));
  }
  unsigned int count = 0;
  if (NvmlReturn r = api->device_count(&count); r != kNvmlSuccess) {
    const std::string why = api->Error(r);
    api->shutdown();
    dlclose(api->library);
    return absl::UnavailableError(
        absl::StrCat("NVML cannot count the GPUs: ", why));
  }
  std::vector<void*> devices;
  std::vector<std::string> names;
  for (unsigned int i = 0; i < count && i < 64; ++i) {
    NvmlDevice device = nullptr;
    if (api->device_by_index(i, &device) != kNvmlSuccess) continue;
    char name[kNameLength] = {};
    if (api->name(device, name, kNameLength) != kNvmlSuccess) name[0] = 0;
    name[kNameLength - 1] = 0;
    devices.push_back(device);
    names.push_back(name);
  }
  if (devices.empty()) {
    api->shutdown();
    dlclose(api->library);
    return absl::UnavailableError("NVML sees no GPU on this machine");
  }
  return std::unique_ptr<GpuMonitor>(
      new GpuMonitor(std::move(api), std::move(devices), std::move(names)));
}

GpuMonitor::GpuMonitor(std::unique_ptr<Api> api, std::vector<void*> devices,
                       std::vector<std::string> names)
    : api_(std::move(api)),
      devices_(std::move(devices)),
      names_(std::move(names)) {}

GpuMonitor::~GpuMonitor() {
  api_->shutdown();
  dlclose(api_->library);
}

std::vector<GpuSample> GpuMonitor::Sample() const {
  std::vector<GpuSample> samples;
  for (size_t i = 0; i < devices_.size(); ++i) {
    NvmlDevice device = devices_[i];
    GpuSample& s = samples.emplace_back();
    s.index = static_cast<int>(i);
    s.name = names_[i];
    NvmlUtilization utilization{};
    if (api_->utilization(device, &utilization) == kNvmlSuccess) {
      s.utilization = utilization.gpu / 100.0;
    }
    NvmlMemory memory{};
    if (api_->memory(device, &memory) == kNvmlSuccess) {
      s.memory_used_bytes = static_cast<int64_t>(memory.used);
      s.memory_total_bytes = static_cast<int64_t>(memory.total);
    }
    unsigned int celsius = 0;
    if (api_->temperature(device, kNvmlTemperatureGpu, &celsius) ==
        kNvmlSuccess) {
      s.temperature_celsius = celsius;
    }
    unsigned int milliwatts = 0;
    if (api_->power(device, &milliwatts) == kNvmlSuccess) {
      s.power_watts = milliwatts / 1000.0;
    }
  }
  return samples;
}

absl::StatusOr<std::unique_ptr<MetricsRegistry::RefresherHandle>>
ExportGpuMetrics(MetricsRegistry* registry, const GpuMonitor* monitor) {
  MetricsRegistry& r = *registry;
  ASSIGN_OR_RETURN(GaugeFamily * utilization,
                   r.Gauge("psflow_gpu_utilization_ratio",
                           "Fraction of the last sample period in which a "
                           "kernel ran on the GPU (NVML).",
                           {"gpu"}));
  ASSIGN_OR_RETURN(GaugeFamily * used,
                   r.Gauge("psflow_gpu_memory_used_bytes",
                           "GPU memory in use, by every process.", {"gpu"}));
  ASSIGN_OR_RETURN(GaugeFamily * total, r.Gauge("psflow_gpu_memory_total_bytes",
                                                "GPU memory.", {"gpu"}));
  ASSIGN_OR_RETURN(GaugeFamily * temperature,
                   r.Gauge("psflow_gpu_temperature_celsius",
                           "GPU core temperature.", {"gpu"}));
  ASSIGN_OR_RETURN(
      GaugeFamily * power,
      r.Gauge("psflow_gpu_power_watts", "GPU board power draw.", {"gpu"}));
  return r.AddRefresher([=] {
    for (const GpuSample& s : monitor->Sample()) {
      const std::string gpu = absl::StrCat(s.index);
      auto set = [&gpu](GaugeFamily* family, std::optional<double> value) {
        if (!value.has_value()) return;
        if (absl::StatusOr<GaugeCell*> cell = family->WithLabels({gpu});
            cell.ok()) {
          (*cell)->Set(*value);
        }
      };
      set(utilization, s.utilization);
      set(used, s.memory_used_bytes);
      set(total, s.memory_total_bytes);
      set(temperature, s.temperature_celsius);
      set(power, s.power_watts);
    }
  });
}

}  // namespace psflow
