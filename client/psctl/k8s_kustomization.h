// The kustomization.yaml `psctl k8s render --out_dir` writes beside the
// manifests, so that `kubectl apply -k <dir>` starts the job
// (docs/operations.md, "Kubernetes"). Pure functions.
//
// Its Secrets are generated from the files `psctl certs gen
// --out=<name>-tls` and `psctl tokens gen --out=<name>-tokens` write into
// that directory (the commands are in the manifests' header), exactly what
// those commands put in their own secret.yaml. They keep fixed names
// (disableNameSuffixHash): the Jobs name them and a Job's pod template is
// immutable, so kustomize's content-hash names would make a second apply
// with new credentials fail on the Jobs instead of rolling them.
#ifndef PSFLOW_CLIENT_PSCTL_K8S_KUSTOMIZATION_H_
#define PSFLOW_CLIENT_PSCTL_K8S_KUSTOMIZATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/psctl/k8s_render.h"

namespace psflow {

// kustomization.yaml for the directory holding the manifests of `options`
// as `manifests_file` (a file name in it): resources, the manifests; when
// secure, generatorOptions and a secretGenerator per Secret; and the image
// as an `images:` entry, where users point it at their registry.
// InvalidArgument names a bad option.
absl::StatusOr<std::string> RenderK8sKustomization(
    const K8sRenderOptions& options, const std::string& manifests_file);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_K8S_KUSTOMIZATION_H_
