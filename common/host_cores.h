// How many cores this process may use: the CPUs in its affinity mask,
// lowered to a cgroup v2 CPU quota when one is set (a container's CPU
// limit, `cpu.max` of /sys/fs/cgroup: a pod limited to 2 CPUs on a 64-core
// node may use 2, not 64). At least 1.
#ifndef PSFLOW_COMMON_HOST_CORES_H_
#define PSFLOW_COMMON_HOST_CORES_H_

#include <optional>
#include <string>

namespace psflow {

int UsableCores();

// The cores a cgroup v2 `cpu.max` line allows ("max 100000": nullopt;
// "200000 100000": 2; a fraction rounds up; malformed: nullopt).
std::optional<int> CoresFromCpuMax(const std::string& cpu_max);

}  // namespace psflow

#endif  // PSFLOW_COMMON_HOST_CORES_H_
