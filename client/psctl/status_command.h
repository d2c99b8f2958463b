// `psctl status`: a live table of every task of a running job (job_status.h).
#ifndef PSFLOW_CLIENT_PSCTL_STATUS_COMMAND_H_
#define PSFLOW_CLIENT_PSCTL_STATUS_COMMAND_H_

#include <memory>

#include "client/psctl/subcommand.h"

namespace psflow {

// Reaches the chief (--chief=HOST:PORT, or the chief of --tf_config or the
// TF_CONFIG environment variable) and prints the table once, or every
// --interval seconds with --watch until the job ends. Exit status: 0 the
// job is healthy (or succeeded), 1 it is not (the table says why), 2 usage.
std::unique_ptr<Subcommand> NewStatusCommand();

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_STATUS_COMMAND_H_
