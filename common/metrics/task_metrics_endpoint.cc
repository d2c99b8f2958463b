#include "common/metrics/task_metrics_endpoint.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/prometheus_text.h"
#include "common/status_macros.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<TaskMetricsEndpoint>> ServeTaskMetrics(
    MetricsRegistry* registry, const TaskMetricsEndpointOptions& options) {
  if (options.port == -1) return nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsRegistry::RefresherHandle> process,
                   ExportProcessMetrics(registry));
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
    // Not "job": Prometheus sets that label itself, from its scrape config.
    if (!job.empty()) labels.emplace_back("psflow_job", job);
    labels.emplace_back("task_type", task_type);
    labels.emplace_back("task_index", task_index);
    return PrometheusText(registry->Snapshot(), labels);
  };
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsHttpServer> started,
                   MetricsHttpServer::Start(server, std::move(render)));
  LOG(INFO) << "Prometheus metrics at http://" << options.host << ":"
            << started->port() << "/metrics";
  return std::make_unique<TaskMetricsEndpoint>(std::move(process),
                                               std::move(started));
}

}  // namespace psflow
