#include "common/metrics/task_metrics_endpoint.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/metrics/prometheus_text.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> ServeTaskMetrics(
    MetricsRegistry* registry, const TaskMetricsEndpointOptions& options) {
  if (options.port == -1) return nullptr;
  MetricsHttpServer::Options server;
  server.host = options.host;
  server.port = options.port;
  const std::string task_type = options.task_type;
  const std::string task_index = absl::StrCat(options.task_index);
  auto job_name = options.job_name;
  auto render = [registry, task_type, task_index, job_name] {
    registry->Refresh();
    MetricLabels labels;
    const std::string job = job_name ? job_name() : "";
    if (!job.empty()) labels.emplace_back("job", job);
    labels.emplace_back("task_type", task_type);
    labels.emplace_back("task_index", task_index);
    return PrometheusText(registry->Snapshot(), labels);
  };
  auto started = MetricsHttpServer::Start(server, std::move(render));
  if (started.ok()) {
    LOG(INFO) << "Prometheus metrics at http://" << options.host << ":"
              << (*started)->port() << "/metrics";
  }
  return started;
}

}  // namespace psflow
