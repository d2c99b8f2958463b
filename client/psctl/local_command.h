// `psctl local`: its flags and what it runs (local_cluster.h).
#ifndef PSFLOW_CLIENT_PSCTL_LOCAL_COMMAND_H_
#define PSFLOW_CLIENT_PSCTL_LOCAL_COMMAND_H_

#include <memory>

#include "client/psctl/subcommand.h"

namespace psflow {

// Runs a whole cluster on 127.0.0.1 and exits with the job's result; a
// problem before anything started (bad flags, a job config that does not
// parse, missing binaries) is a usage error (2).
std::unique_ptr<Subcommand> NewLocalCommand();

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_LOCAL_COMMAND_H_
