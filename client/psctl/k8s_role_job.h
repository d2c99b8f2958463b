// One role's Indexed Job in the manifests of `psctl k8s render`
// (k8s_render.h): the pod template each of the role's tasks runs in, with
// its command and TF_CONFIG template, hardening, probes, resources and
// volumes. Internal to k8s_render.cc, which renders the job's other
// objects. Stateless functions; thread-safe.
#ifndef PSFLOW_CLIENT_PSCTL_K8S_ROLE_JOB_H_
#define PSFLOW_CLIENT_PSCTL_K8S_ROLE_JOB_H_

#include <map>
#include <string>
#include <vector>

#include "client/psctl/k8s_render.h"
#include "common/task.h"

namespace psflow {
namespace k8s_render_internal {

inline constexpr int kPort = 2222;
// Every task serves Prometheus metrics here (--metrics_port); the pods
// carry the usual prometheus.io scrape annotations.
inline constexpr int kMetricsPort = 9464;
inline constexpr char kReadWriteOnce[] = "ReadWriteOnce";
inline constexpr char kReadWriteMany[] = "ReadWriteMany";

struct Role {
  TaskType type;
  std::string short_name;  // in object names: chief, ps, worker, evaluator
  int count;
  std::string binary;  // under /opt/psflow
};

// Every task's stable DNS name and port, by role.
using TaskAddresses = std::map<TaskType, std::vector<std::string>>;

// The name of the role's Service and Job: <name>-<role>.
std::string RoleObjectName(const K8sRenderOptions& options, const Role& role);

// The YAML document of `role`'s Job, for checked options; `roles` are
// all of the job's (pods that share a ReadWriteOnce claim are placed
// together) and `addresses` every task's.
std::string RenderRoleJob(const K8sRenderOptions& options,
                          const std::vector<Role>& roles,
                          const TaskAddresses& addresses, const Role& role);

}  // namespace k8s_render_internal
}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_K8S_ROLE_JOB_H_
