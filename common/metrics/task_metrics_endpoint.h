// Serves one task's metrics registry to Prometheus (--metrics_port of every
// role): refreshes the registry, then renders it with the task's labels
// (job, task_type, task_index). Adds the process's system metrics
// (psflow_process_*).
#ifndef PSFLOW_COMMON_METRICS_TASK_METRICS_ENDPOINT_H_
#define PSFLOW_COMMON_METRICS_TASK_METRICS_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/metrics/metrics_http_server.h"
#include "common/metrics/metrics_registry.h"
#include "common/mutex.h"

namespace psflow {

// The job's name for the labels, set once the task learns it (workers and
// the evaluator learn the job from the chief). Thread-safe.
class JobNameLabel {
 public:
  void Set(std::string name) {
    MutexLock lock(&mu_);
    name_ = std::move(name);
  }
  std::string Get() const {
    MutexLock lock(&mu_);
    return name_;
  }

 private:
  mutable Mutex mu_;
  std::string name_ ABSL_GUARDED_BY(mu_);
};

struct TaskMetricsEndpointOptions {
  std::string host = "0.0.0.0";
  // -1: no endpoint; 0: any free port.
  int port = -1;
  std::string task_type;
  int task_index = 0;
  // The job's name, once known (empty until then: the label is left out).
  std::function<std::string()> job_name;
};

// A task's endpoint: the HTTP server, and the process's system metrics
// (process_metrics.h) it adds to the registry while it serves.
class TaskMetricsEndpoint {
 public:
  TaskMetricsEndpoint(
      std::unique_ptr<MetricsRegistry::RefresherHandle> process_metrics,
      std::unique_ptr<MetricsHttpServer> server)
      : process_metrics_(std::move(process_metrics)),
        server_(std::move(server)) {}
  int port() const { return server_->port(); }

 private:
  // Declared first: destroyed after the server stops serving.
  std::unique_ptr<MetricsRegistry::RefresherHandle> process_metrics_;
  std::unique_ptr<MetricsHttpServer> server_;
};

// Null (and OK) when options.port is -1. `registry` must outlive the
// endpoint. Logs the address it serves.
absl::StatusOr<std::unique_ptr<TaskMetricsEndpoint>> ServeTaskMetrics(
    MetricsRegistry* registry, const TaskMetricsEndpointOptions& options);

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_TASK_METRICS_ENDPOINT_H_
