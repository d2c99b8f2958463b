// How much memory this process may use: the machine's, or its container's
// when a cgroup limit is lower (cgroup v2 memory.max, v1
// memory.limit_in_bytes), as Kubernetes sets a pod's limit.
#ifndef PSFLOW_COMMON_HOST_MEMORY_H_
#define PSFLOW_COMMON_HOST_MEMORY_H_

#include <cstdint>
#include <string>

namespace psflow {

struct HostMemory {
  int64_t bytes = 0;
  // Where the figure comes from: "this host's memory" or "the container's
  // limit (/sys/fs/cgroup/memory.max)".
  std::string source;
};

HostMemory AvailableMemory();

}  // namespace psflow

#endif  // PSFLOW_COMMON_HOST_MEMORY_H_
