// Renders a MetricsRegistry snapshot in Prometheus's text exposition format
// (version 0.0.4), the format every Prometheus server scrapes:
//
//   # HELP psflow_ps_pulls_total Pull requests answered.
//   # TYPE psflow_ps_pulls_total counter
//   psflow_ps_pulls_total{job="mnist",task_type="ps",task_index="0"} 1234
//
// Histograms become cumulative _bucket{le="..."} series (ending with
// le="+Inf"), _sum and _count. `constant_labels` (the job and the task)
// come first on every series; label values are escaped (\\, \", \n).
#ifndef PSFLOW_COMMON_METRICS_PROMETHEUS_TEXT_H_
#define PSFLOW_COMMON_METRICS_PROMETHEUS_TEXT_H_

#include <string>
#include <utility>
#include <vector>

#include "common/metrics/metrics_registry.h"

namespace psflow {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// The media type of the format, for the HTTP Content-Type header.
inline constexpr char kPrometheusTextContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

std::string PrometheusText(const MetricsSnapshot& snapshot,
                           const MetricLabels& constant_labels = {});

// A label value or help text escaped as the format requires.
std::string EscapeLabelValue(const std::string& value);
std::string EscapeHelp(const std::string& help);

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_PROMETHEUS_TEXT_H_
