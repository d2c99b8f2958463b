// `psctl certs gen`: a job's CA and one certificate per task of its
// TF_CONFIG cluster, plus the Kubernetes Secret that carries them
// (job_certificates.h).
#ifndef PSFLOW_CLIENT_PSCTL_CERTS_COMMAND_H_
#define PSFLOW_CLIENT_PSCTL_CERTS_COMMAND_H_

#include <memory>

#include "client/psctl/subcommand.h"

namespace psflow {

std::unique_ptr<Subcommand> NewCertsGenCommand();

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_CERTS_COMMAND_H_
