// `psctl k8s render`: its flags and what it runs (k8s_render.h).
#ifndef PSFLOW_CLIENT_PSCTL_K8S_COMMAND_H_
#define PSFLOW_CLIENT_PSCTL_K8S_COMMAND_H_

#include <memory>

#include "client/psctl/subcommand.h"

namespace psflow {

// Writes the Kubernetes manifests for a job of the size given by flags to
// standard output; a bad option is a usage error (2) naming it.
std::unique_ptr<Subcommand> NewK8sRenderCommand();

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_K8S_COMMAND_H_
