// A stand-in for libnvidia-ml.so.1 with two GPUs and fixed readings, so
// GpuMonitor's loading, binding and unit conversions are tested on machines
// without an NVIDIA driver. Only tests load it; GPU hosts load the real
// library.
#include <cstring>

namespace {

struct FakeUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct FakeMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

int initialized = 0;
int handles[2];

}  // namespace

extern "C" {

int nvmlInit_v2() {
  ++initialized;
  return 0;
}
int nvmlShutdown() {
  --initialized;
  return 0;
}
const char* nvmlErrorString(int) { return "fake NVML error"; }
int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (initialized <= 0) return 1;  // NVML_ERROR_UNINITIALIZED
  *count = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &handles[index];
  return 0;
}
int nvmlDeviceGetName(void*, char* name, unsigned int length) {
  std::strncpy(name, "Fake GPU", length);
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, FakeUtilization* u) {
  u->gpu = 87;
  u->memory = 40;
  return 0;
}
int nvmlDeviceGetMemoryInfo(void*, FakeMemory* m) {
  m->total = 80ull << 30;
  m->used = 3ull << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetTemperature(void*, int sensor, unsigned int* celsius) {
  if (sensor != 0) return 2;
  *celsius = 61;
  return 0;
}
// Power is "not supported" on the second GPU, as on some boards.
int nvmlDeviceGetPowerUsage(void* device, unsigned int* milliwatts) {
  if (device != &handles[0]) return 3;  // NVML_ERROR_NOT_SUPPORTED
  *milliwatts = 245500;
  return 0;
}

}  // extern "C"
