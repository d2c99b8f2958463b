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

std::optional<int> CoresFromCfs(const std::string& quota_us,
                                const std::string& period_us) {
  std::istringstream quota(quota_us), period(period_us);
  std::string quota_text, period_text;
  if (!(quota >> quota_text) || !(period >> period_text)) return std::nullopt;
  return CoresFromCpuMax(quota_text + " " + period_text);
}

namespace {

// The file's first line, or "" when it cannot be read.
std::string FirstLine(const char* path) {
  std::ifstream file(path);
  std::string line;
  if (file) std::getline(file, line);
  return line;
}

// The process's CPU quota in cores, if its cgroup sets one (v2 mounts the
// process's own cgroup at /sys/fs/cgroup inside a container's cgroup
// namespace; v1 at /sys/fs/cgroup/cpu).
std::optional<int> QuotaCores() {
  const std::string cpu_max = FirstLine("/sys/fs/cgroup/cpu.max");
  if (!cpu_max.empty()) return CoresFromCpuMax(cpu_max);
  return CoresFromCfs(FirstLine("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                      FirstLine("/sys/fs/cgroup/cpu/cpu.cfs_period_us"));
}

}  // namespace

int UsableCores() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  if (std::optional<int> quota = QuotaCores()) cores = std::min(cores, *quota);
  return std::max(1, cores);
}

}  // namespace psflow
