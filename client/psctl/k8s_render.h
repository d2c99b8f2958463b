// `psctl k8s render`: Kubernetes manifests for a psflow job, sized by
// flags rather than hand-edited copies (docs/operations.md, "Kubernetes").
//
// One Indexed Job per role (chief, ps, worker, evaluator), each with a
// headless Service of the same name: pod i of role r is
// <name>-<r>-<i>.<name>-<r>.<namespace>.svc, and its TF_CONFIG is derived
// at start from its completion index (JOB_COMPLETION_INDEX). The chief's
// Job completing is the job's end; ps and workers exit when the chief says
// so, and their Jobs complete too. A PersistentVolumeClaim holds
// checkpoints and logs: ReadWriteOnce by default (what a cluster's default
// storage class binds), mounted by the pods that read or write checkpoints
// (chief, parameter servers, evaluator), which are then scheduled onto one
// node; ReadWriteMany (an NFS-like class) lets them spread and workers keep
// their event files on it too. Workers ask for nvidia.com/gpu when given
// GPUs. Every pod has 90 s from SIGTERM to SIGKILL: the chief saves a
// checkpoint on SIGTERM (at most 60 s) from the parameter servers, which
// keep serving for 70 s after theirs.
//
// Hardened (docs/operations.md, "Kubernetes"): every pod runs as a
// non-root user (65532) with a read-only root filesystem, no privilege
// escalation, every capability dropped, the runtime's seccomp profile and
// no service-account token, with CPU and memory requests equal to its
// limits; a NetworkPolicy admits only the job's own pods to its ports, and
// pods of namespaces labelled psflow/monitoring=true to the metrics port.
// Secure (the default): every task has mutual TLS (Secret <name>-tls from
// `psctl certs gen`) and its role's job token (Secret <name>-tokens from
// `psctl tokens gen`, of which each pod mounts only what its role needs);
// probes then check the TCP port (kubelet's gRPC probes cannot speak TLS).
// The header of the manifests gives the commands; the kustomization
// (k8s_kustomization.h) builds both Secrets from the files they write.
#ifndef PSFLOW_CLIENT_PSCTL_K8S_RENDER_H_
#define PSFLOW_CLIENT_PSCTL_K8S_RENDER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/task.h"

namespace psflow {

struct K8sRenderOptions {
  // Prefix of every object's name; a DNS-1035 label (lowercase letters,
  // digits, '-'; starts with a letter; at most 40 characters).
  std::string name = "psflow";
  std::string ns = "default";
  // The container image holding the psflow bundle under /opt/psflow
  // (deploy/docker/Dockerfile), e.g. "registry.example/psflow:1.2".
  std::string image;
  // Always, IfNotPresent or Never. IfNotPresent runs an image already on
  // the node (built there or `kind load`ed) and pulls only a missing one,
  // whatever its tag (Kubernetes' default for a ":latest" tag is Always).
  std::string image_pull_policy = "IfNotPresent";
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
  // ReadWriteOnce or ReadWriteMany: see above.
  std::string storage_access_mode = "ReadWriteOnce";
  // Requests and limits of every pod.
  std::string cpu = "2";
  std::string memory = "4Gi";
  // Mutual TLS and job tokens from the two Secrets (see above); false
  // renders an open job, for a private test cluster only.
  bool secure = true;
};

// OK, or InvalidArgument naming the first bad option and its fix.
absl::Status CheckK8sRenderOptions(const K8sRenderOptions& options);

// The job's tasks in its cluster's order (chief, ps, workers, evaluator),
// for options that CheckK8sRenderOptions accepts.
std::vector<TaskId> K8sJobTasks(const K8sRenderOptions& options);

// The manifests, as one multi-document YAML stream. InvalidArgument names
// a bad option.
absl::StatusOr<std::string> RenderK8sManifests(const K8sRenderOptions& options);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_K8S_RENDER_H_
