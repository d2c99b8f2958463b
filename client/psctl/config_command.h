// `psctl config check <job.json>`: checks a job config the way the chief,
// the workers and the evaluator will (job_config_check.h) without starting
// anything; prints "OK: <the job>" and exits 0, or prints each problem on
// its own line and exits 1.
#ifndef PSFLOW_CLIENT_PSCTL_CONFIG_COMMAND_H_
#define PSFLOW_CLIENT_PSCTL_CONFIG_COMMAND_H_

#include <functional>
#include <memory>

#include "client/psctl/subcommand.h"
#include "common/host_memory.h"

namespace psflow {

// `host` says, when the command runs, what a worker's memory is checked
// against besides the job's training.worker_memory_mib: this host's memory
// or container limit, as the chief checks it on its own host; tests pass a
// fixed figure.
std::unique_ptr<Subcommand> NewConfigCheckCommand(
    std::function<HostMemory()> host = AvailableMemory);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_CONFIG_COMMAND_H_
