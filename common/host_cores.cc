#include "common/host_cores.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"

namespace psflow {

std::optional<int> CoresFromCpuMax(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota_text, period_text;
  if (!(in >> quota_text >> period_text)) return std::nullopt;
  int64_t quota = 0, period = 0;
  if (quota_text == "max" || !absl::SimpleAtoi(quota_text, &quota) ||
      !absl::SimpleAtoi(period_text, &period) || quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  return static_cast<int>(
      std::clamp<int64_t>((quota + period - 1) / period, 1, 1 << 20));
}

int UsableCores() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  // The process's own cgroup (v2 mounts it at /sys/fs/cgroup inside a
  // container's cgroup namespace).
  std::ifstream file("/sys/fs/cgroup/cpu.max");
  std::string line;
  if (file && std::getline(file, line)) {
    if (std::optional<int> quota = CoresFromCpuMax(line)) {
      cores = std::min(cores, *quota);
    }
  }
  return std::max(1, cores);
}

}  // namespace psflow
