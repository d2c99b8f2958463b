#include "tests/dashboard_queries.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

std::vector<std::string> Names(const std::string& expr) {
  absl::StatusOr<std::vector<std::string>> names = PromqlMetricNames(expr);
  EXPECT_OK(names) << expr;
  return names.ok() ? *names : std::vector<std::string>{};
}

TEST(PromqlMetricNamesTest, AHistogramQuantileNamesOnlyTheBucketSeries) {
  EXPECT_THAT(
      Names("histogram_quantile(0.99, sum by (le, phase) (rate("
            "psflow_worker_step_phase_seconds_bucket{psflow_job=\"$psflow_job\""
            ", phase=~\"pull_wait|push_wait\"}[$__rate_interval])))"),
      ElementsAre("psflow_worker_step_phase_seconds_bucket"));
}

TEST(PromqlMetricNamesTest, VectorMatchingLabelListsAreNotMetrics) {
  EXPECT_THAT(
      Names("up * on (instance, job) group_left (task_type, task_index) "
            "group by (instance, job, task_type, task_index) (max_over_time("
            "process_resident_memory_bytes{psflow_job=\"x\"}[1h]))"),
      ElementsAre("up", "process_resident_memory_bytes"));
  EXPECT_THAT(Names("sum(rate(a_total[5m])) by (job) / ignoring(le) "
                    "group_right count without (mode) (b_total) "
                    "> bool 0 and on() c unless d or e atan2 f"),
              ElementsAre("a_total", "b_total", "c", "d", "e", "f"));
}

TEST(PromqlMetricNamesTest, KeywordsAreCaseInsensitiveFunctionsAreNot) {
  EXPECT_THAT(Names("SUM BY (Job) (x) AND ON (a) y"), ElementsAre("x", "y"));
  EXPECT_THAT(PromqlMetricNames("RATE(x[5m])"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("RATE() is not a PromQL function")));
}

TEST(PromqlMetricNamesTest, StringsNumbersDurationsAndVariablesAreSkipped) {
  EXPECT_THAT(
      Names("label_replace(m1{a=\"}{\\\"x\", b='y}', c=`z\\`}, \"dst\", "
            "\"$1\", \"src\", \"(.*)\") * 1e-3 + 0x1F - .5 * NaN / Inf "
            "+ m2 offset 1h30m + m3 @ start() + $scale * ${other:regex} "
            "# a comment names no_metric\n + sum_over_time(m4[10m:1m])"),
      ElementsAre("m1", "m2", "m3", "m4"));
}

TEST(PromqlMetricNamesTest, ANameMatcherNamesItsMetric) {
  EXPECT_THAT(Names("{__name__=\"psflow_x_total\", job=\"j\"} + "
                    "{__name__=~\"psflow_.*\"}"),
              ElementsAre("psflow_x_total"));
}

TEST(PromqlMetricNamesTest, EachMetricIsNamedOnce) {
  EXPECT_THAT(Names("a / a + rate(b[1m]) / rate(a[1m])"),
              ElementsAre("a", "b"));
}

TEST(PromqlMetricNamesTest, AnUnknownFunctionIsAnError) {
  // A typo of rate(): taken for a metric it would pass unnoticed.
  EXPECT_THAT(PromqlMetricNames("sum(rat(psflow_worker_steps_total[5m]))"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rat() is not a PromQL function")));
}

TEST(PromqlMetricNamesTest, UnterminatedPartsAreErrors) {
  for (const char* expr : {"a{b=\"c}", "a{b=\"c\"", "rate(a[5m)", "a + ${x",
                           "sum by (a b", "a{b='c"}) {
    EXPECT_THAT(
        PromqlMetricNames(expr),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not end")))
        << expr;
  }
}

TEST(GrafanaVariablesTest, AllThreeSyntaxesAreFoundAndExpanded) {
  const std::string expr =
      "rate(m{j=\"$psflow_job\", t=~\"${task_type:regex}\", "
      "i=\"[[old]]\"}[$__rate_interval])";
  EXPECT_THAT(GrafanaVariableNames(expr),
              ElementsAre("psflow_job", "task_type", "old", "__rate_interval"));
  EXPECT_THAT(ExpandGrafanaVariables(expr, {{"psflow_job", "j1"},
                                            {"task_type", ".*"},
                                            {"old", "o"},
                                            {"__rate_interval", "4s"}}),
              IsOkAndHolds("rate(m{j=\"j1\", t=~\".*\", i=\"o\"}[4s])"));
  EXPECT_THAT(
      ExpandGrafanaVariables(expr, {{"psflow_job", "j1"}}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("$task_type")));
}

constexpr char kDashboard[] = R"json({
  "panels": [
    {"id": 1, "type": "row", "title": "Open row", "panels": []},
    {"id": 2, "type": "timeseries", "title": "Steps",
     "targets": [{"refId": "A",
                  "expr": "sum(rate(psflow_worker_steps_total[5m]))"},
                 {"refId": "B",
                  "expr": "sum(rate(psflow_no_such_metric_total[5m]))"}]},
    {"id": 3, "type": "row", "title": "Collapsed", "collapsed": true,
     "panels": [{"id": 4, "title": "Memory",
                 "targets": [{"refId": "A",
                              "expr": "process_resident_memory_bytes"}]}]},
    {"id": 5, "title": "Constant",
     "targets": [{"refId": "A", "expr": "vector(1)"}]},
    {"id": 6, "title": "Scrapes",
     "targets": [{"refId": "A", "expr": "up"}]}
  ],
  "templating": {"list": [
    {"name": "psflow_job", "type": "query",
     "query": {"query": "label_values(psflow_process_threads{a=\"x,y\"}, psflow_job)",
               "refId": "V"}},
    {"name": "old_style", "type": "query",
     "query": "query_result(max by (psflow_job) (psflow_worker_steps_total))"},
    {"name": "bare", "type": "query", "query": "label_values(task_type)"},
    {"name": "DS", "type": "datasource", "query": "prometheus"}
  ]}
})json";

TEST(DashboardQueriesTest, PanelsRowsAndQueryVariablesAreRead) {
  ASSERT_OK_AND_ASSIGN(JsonValue dashboard, ParseJson(kDashboard));
  ASSERT_OK_AND_ASSIGN(std::vector<DashboardQuery> queries,
                       DashboardQueries(dashboard));
  std::vector<std::string> where;
  std::vector<std::string> exprs;
  for (const DashboardQuery& q : queries) {
    where.push_back(q.where);
    exprs.push_back(q.expr);
  }
  EXPECT_THAT(where,
              ElementsAre("panel \"Steps\" (id 2), target A",
                          "panel \"Steps\" (id 2), target B",
                          "panel \"Memory\" (id 4), target A",
                          "panel \"Constant\" (id 5), target A",
                          "panel \"Scrapes\" (id 6), target A",
                          "variable \"psflow_job\"", "variable \"old_style\"",
                          "variable \"bare\""));
  EXPECT_EQ(exprs[5], "psflow_process_threads{a=\"x,y\"}");
  EXPECT_EQ(exprs[6], "max by (psflow_job) (psflow_worker_steps_total)");
  EXPECT_EQ(exprs[7], "");
  EXPECT_THAT(DashboardVariableNames(dashboard),
              ElementsAre("psflow_job", "old_style", "bare", "DS"));
}

TEST(DashboardQueriesTest, UnknownVariableFunctionsAndNonDashboardsAreErrors) {
  ASSERT_OK_AND_ASSIGN(JsonValue metrics_variable,
                       ParseJson(R"json({"panels": [], "templating": {"list": [
          {"name": "m", "type": "query", "query": "metrics(psflow_.*)"}]}})json"));
  EXPECT_THAT(DashboardQueries(metrics_variable),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("variable \"m\"")));
  ASSERT_OK_AND_ASSIGN(JsonValue not_a_dashboard,
                       ParseJson(R"json({"a": 1})json"));
  EXPECT_THAT(
      DashboardQueries(not_a_dashboard),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no \"panels\"")));
}

// The check the dashboard test makes, shown to fail: an unknown metric, a
// query naming none and a query the extractor rejects are each reported,
// naming the query; a metric Prometheus makes itself passes when known.
TEST(UnexportedMetricsTest, EachKindOfProblemIsReportedWithItsQuery) {
  ASSERT_OK_AND_ASSIGN(JsonValue dashboard, ParseJson(kDashboard));
  ASSERT_OK_AND_ASSIGN(std::vector<DashboardQuery> queries,
                       DashboardQueries(dashboard));
  queries.push_back({"panel \"Typo\"", "rat(psflow_worker_steps_total[1m])"});
  const std::set<std::string> exported = {"psflow_worker_steps_total",
                                          "process_resident_memory_bytes",
                                          "psflow_process_threads"};
  const std::vector<std::string> problems =
      UnexportedMetrics(queries, exported, {"up"});
  EXPECT_THAT(
      problems,
      ElementsAre(
          AllOf(HasSubstr("panel \"Steps\" (id 2), target B: "
                          "psflow_no_such_metric_total is not exported"),
                HasSubstr("query: sum(rate(psflow_no_such_metric_total")),
          HasSubstr("panel \"Constant\" (id 5), target A: names no metric"),
          HasSubstr("variable \"bare\": names no metric"),
          HasSubstr("panel \"Typo\": PromQL \"rat(")));
  // Without `up` known, the scrape panel is reported too.
  EXPECT_THAT(UnexportedMetrics(queries, exported, {}), SizeIs(5));
  // Everything exported: only the queries without metrics remain.
  queries.erase(queries.begin() + 1);  // the unknown metric
  queries.pop_back();                  // the typo
  EXPECT_THAT(UnexportedMetrics(queries, exported, {"up"}), SizeIs(2));
}

TEST(ExposedMetricNamesTest, SampleLinesCountTypeOnlyFamiliesDoNot) {
  EXPECT_THAT(ExposedMetricNames("# HELP a_seconds Time.\n"
                                 "# TYPE a_seconds histogram\n"
                                 "a_seconds_bucket{le=\"1\"} 2\n"
                                 "a_seconds_bucket{le=\"+Inf\"} 3\n"
                                 "a_seconds_sum 1.5\n"
                                 "a_seconds_count 3\n"
                                 "# HELP b Labelled, no series yet.\n"
                                 "# TYPE b gauge\n"
                                 "\n"
                                 "process_cpu_seconds_total 0.25\n"),
              ElementsAre("a_seconds_bucket", "a_seconds_count",
                          "a_seconds_sum", "process_cpu_seconds_total"));
  EXPECT_THAT(ExposedMetricNames(""), IsEmpty());
}

}  // namespace
}  // namespace psflow::testing
