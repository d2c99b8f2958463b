// `psctl k8s render`: Kubernetes manifests for a psflow job, sized by
// flags rather than hand-edited copies (docs/operations.md, "Kubernetes").
//
// One Indexed Job per role (chief, ps, worker, evaluator), each with a
// headless Service of the same name: pod i of role r is
// <name>-<r>-<i>.<name>-<r>.<namespace>.svc, and its TF_CONFIG is derived
// at start from its completion index (JOB_COMPLETION_INDEX). The chief's
// Job completing is the job's end; ps and workers exit when the chief says
// so, and their Jobs complete too. A ReadWriteMany PersistentVolumeClaim
// holds checkpoints and logs; workers ask for nvidia.com/gpu when given
// GPUs.
//
// Hardened (docs/operations.md, "Kubernetes"): every pod runs as a
// non-root user (65532) with a read-only root filesystem, no privilege
// escalation, every capability dropped, the runtime's seccomp profile and
// no service-account token, with CPU and memory requests equal to its
// limits; a NetworkPolicy admits only the job's own pods to its ports.
// Secure (the default): every task has mutual TLS (Secret <name>-tls from
// `psctl certs gen`) and its role's job token (Secret <name>-tokens from
// `psctl tokens gen`, of which each pod mounts only what its role needs);
// probes then check the TCP port (kubelet's gRPC probes cannot speak TLS).
// The header of the output says how to make the Secrets.
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
  // Requests and limits of every pod.
  std::string cpu = "2";
  std::string memory = "4Gi";
  // Mutual TLS and job tokens from the two Secrets (see above); false
  // renders an open job, for a private test cluster only.
  bool secure = true;
};

// The manifests, as one multi-document YAML stream. InvalidArgument names
// a bad option.
absl::StatusOr<std::string> RenderK8sManifests(const K8sRenderOptions& options);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_K8S_RENDER_H_
