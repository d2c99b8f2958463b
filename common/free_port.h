// Asks the kernel for a free TCP port on 127.0.0.1. The port is released
// before returning, so another process could take it first; launchers use
// it only for processes they start right away, and those fail loudly
// ("port in use") rather than share it.
#ifndef PSFLOW_COMMON_FREE_PORT_H_
#define PSFLOW_COMMON_FREE_PORT_H_

#include <vector>

#include "absl/status/statusor.h"

namespace psflow {

absl::StatusOr<int> PickFreePort();

// `count` distinct free ports (all held while they are chosen, so no two
// are the same), for a launcher that starts that many servers at once.
absl::StatusOr<std::vector<int>> PickFreePorts(int count);

}  // namespace psflow

#endif  // PSFLOW_COMMON_FREE_PORT_H_
