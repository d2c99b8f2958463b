// `psctl k8s render`: Kubernetes manifests for a psflow job, sized by
// flags rather than hand-edited copies (docs/operations.md, "Kubernetes").
//
// One Indexed Job per role (chief, ps, worker, evaluator), each with a
// headless Service of the same name: pod i of role r is
// <name>-<r>-<i>.<name>-<r>.<namespace>.svc, and its TF_CONFIG is derived
// at start from its completion index (JOB_COMPLETION_INDEX). The chief's
// Job completing is the job's end; ps and workers exit when the chief says
// so, and their Jobs complete too. A ReadWriteMany PersistentVolumeClaim
// holds checkpoints and logs; gRPC health probes on port 2222; workers ask
// for nvidia.com/gpu when given GPUs.
#ifndef PSFLOW_CLIENT_PSCTL_K8S_RENDER_H_
#define PSFLOW_CLIENT_PSCTL_K8S_RENDER_H_

#include <string>

#include "absl/status/statusor.h"

namespace psflow {

struct K8sRenderOptions {
  // Prefix of every object's name; a DNS-1035 label (lowercase letters,
  // digits, '-'; starts with a letter; at most 40 characters).
  std::string name = "psflow";
  std::string ns = "default";
  // The container image holding the psflow bundle under /opt/psflow.
  std::string image;
  int num_ps = 1;
  int num_workers = 2;
  bool evaluator = true;
  // Per worker; > 0 adds nvidia.com/gpu limits and --device=cuda.
  int gpus_per_worker = 0;
  // The job config inside the image.
  std::string job_config = "/opt/psflow/configs/fashion_mnist_mlp.json";
  // The claim for checkpoints and logs.
  std::string storage = "10Gi";
  std::string storage_class;  // empty: the cluster's default
  // Requests of every pod.
  std::string cpu = "2";
  std::string memory = "4Gi";
};

// The manifests, as one multi-document YAML stream. InvalidArgument names
// a bad option.
absl::StatusOr<std::string> RenderK8sManifests(const K8sRenderOptions& options);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_K8S_RENDER_H_
