// How many cores this process may use: the CPUs in its affinity mask,
// lowered to its cgroup's CPU quota when one is set (a container's CPU
// limit: a pod limited to 2 CPUs on a 64-core node may use 2, not 64):
// cgroup v2's `cpu.max` of /sys/fs/cgroup, else cgroup v1's
// `cpu.cfs_quota_us` and `cpu.cfs_period_us` of /sys/fs/cgroup/cpu. At
// least 1.
#ifndef PSFLOW_COMMON_HOST_CORES_H_
#define PSFLOW_COMMON_HOST_CORES_H_

#include <optional>
#include <string>

namespace psflow {

int UsableCores();

// The cores a cgroup v2 `cpu.max` line allows ("max 100000": nullopt;
// "200000 100000": 2; a fraction rounds up; malformed: nullopt).
std::optional<int> CoresFromCpuMax(const std::string& cpu_max);

// The same from cgroup v1's two files' contents ("-1": no quota).
std::optional<int> CoresFromCfs(const std::string& quota_us,
                                const std::string& period_us);

}  // namespace psflow

#endif  // PSFLOW_COMMON_HOST_CORES_H_
