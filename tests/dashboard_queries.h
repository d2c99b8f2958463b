// Reads the PromQL queries out of a Grafana dashboard (the JSON that
// Grafana exports and imports, e.g. deploy/grafana/psflow.json) and names
// the metrics each one reads, so a test can hold them against what a
// running job's /metrics endpoints export.
//
// The metric-name extractor is a small PromQL tokenizer, not a parser: it
// skips strings, label matchers {...} (except a `__name__="..."`
// matcher, which names a metric), range and subquery selectors [...],
// numbers and durations, Grafana variables ($x, ${x}, ${x:regex}),
// grouping label lists (by, without, on, ignoring, group_left,
// group_right) and keywords, and takes an identifier followed by `(` as a
// function or aggregation, which must be one PromQL (Prometheus 2.42)
// knows. Every other identifier is a metric name. Whether the query is
// valid PromQL is for Prometheus to say (tests/grafana_dashboard_test asks
// it).
//
// Pure functions of their arguments; thread-compatible.
#ifndef PSFLOW_TESTS_DASHBOARD_QUERIES_H_
#define PSFLOW_TESTS_DASHBOARD_QUERIES_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"

namespace psflow::testing {

// The metric names `expr` reads, in order of first appearance, each once.
// InvalidArgument for a call of an unknown function (a typo such as
// `rat(`) and for an unterminated string, {...}, [...] or ${...}.
absl::StatusOr<std::vector<std::string>> PromqlMetricNames(
    absl::string_view expr);

// The Grafana variables `expr` uses ($x, ${x}, ${x:format}, [[x]]),
// strings included, in order of first appearance, each once.
std::vector<std::string> GrafanaVariableNames(absl::string_view expr);

// `expr` with every Grafana variable replaced by its value in `values`.
// InvalidArgument naming a variable that `values` lacks.
absl::StatusOr<std::string> ExpandGrafanaVariables(
    absl::string_view expr, const std::map<std::string, std::string>& values);

// One PromQL query of a dashboard.
struct DashboardQuery {
  // Where it sits, for messages: `panel "Loss" (id 7), target A` or
  // `variable "psflow_job"`.
  std::string where;
  // PromQL, Grafana variables unexpanded. For a query variable's
  // `label_values(<selector>, <label>)` this is the selector.
  std::string expr;
};

// Every query of a dashboard: each panel's targets (panels inside rows
// included) and each query variable's. InvalidArgument when the document
// is not a dashboard (no "panels" list), or a target or variable query
// is not a string, or a variable uses a Grafana query function other
// than label_values() and query_result().
absl::StatusOr<std::vector<DashboardQuery>> DashboardQueries(
    const JsonValue& dashboard);

// The names of the dashboard's template variables (templating.list).
std::vector<std::string> DashboardVariableNames(const JsonValue& dashboard);

// The metric names of each sample line of a Prometheus text exposition
// (`foo_bucket{le="1"} 3` gives foo_bucket), so a histogram gives its
// _bucket, _sum and _count; families declared by # TYPE without a sample
// give nothing, as Prometheus stores nothing for them.
std::set<std::string> ExposedMetricNames(absl::string_view exposition);

// One line per problem: a query whose metric is not in `exported`
// (`panel "Loss" (id 7), target A: psflow_worker_los is not exported
// (query: ...)`), a query that names no metric at all, and a query the
// extractor rejects. Names in `also_known` (series Prometheus makes
// itself, such as `up`) count as exported. Empty when every query reads
// only exported metrics.
std::vector<std::string> UnexportedMetrics(
    const std::vector<DashboardQuery>& queries,
    const std::set<std::string>& exported,
    const std::set<std::string>& also_known);

}  // namespace psflow::testing

#endif  // PSFLOW_TESTS_DASHBOARD_QUERIES_H_
