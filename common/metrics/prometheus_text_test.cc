#include "common/metrics/prometheus_text.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(PrometheusTextTest, CountersAndGaugesWithConstantAndOwnLabels) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(CounterFamily * pulls,
                       registry.Counter("psflow_ps_pulls_total",
                                        "Pull requests answered.", {"mode"}));
  ASSERT_OK_AND_ASSIGN(CounterCell * tcp, pulls->WithLabels({"tcp"}));
  tcp->Add(12);
  ASSERT_OK_AND_ASSIGN(GaugeFamily * memory,
                       registry.Gauge("psflow_ps_memory_bytes",
                                      "Bytes held.\nMultiline \\ help."));
  ASSERT_OK_AND_ASSIGN(GaugeCell * all, memory->WithLabels({}));
  all->Set(1.5);
  EXPECT_EQ(PrometheusText(registry.Snapshot(),
                           {{"job", "mnist"}, {"task_type", "ps"}}),
            "# HELP psflow_ps_memory_bytes Bytes held.\\nMultiline \\\\ "
            "help.\n"
            "# TYPE psflow_ps_memory_bytes gauge\n"
            "psflow_ps_memory_bytes{job=\"mnist\",task_type=\"ps\"} 1.5\n"
            "# HELP psflow_ps_pulls_total Pull requests answered.\n"
            "# TYPE psflow_ps_pulls_total counter\n"
            "psflow_ps_pulls_total{job=\"mnist\",task_type=\"ps\",mode="
            "\"tcp\"} 12\n");
}

TEST(PrometheusTextTest, HistogramsAreCumulativeWithSumAndCount) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(HistogramFamily * staleness,
                       registry.Histogram("psflow_ps_gradient_staleness",
                                          "Staleness.", {}, {0, 1, 3}));
  ASSERT_OK_AND_ASSIGN(HistogramCell * cell, staleness->WithLabels({}));
  for (double v : {0, 0, 1, 2, 5}) cell->Observe(v);
  EXPECT_EQ(PrometheusText(registry.Snapshot()),
            "# HELP psflow_ps_gradient_staleness Staleness.\n"
            "# TYPE psflow_ps_gradient_staleness histogram\n"
            "psflow_ps_gradient_staleness_bucket{le=\"0\"} 2\n"
            "psflow_ps_gradient_staleness_bucket{le=\"1\"} 3\n"
            "psflow_ps_gradient_staleness_bucket{le=\"3\"} 4\n"
            "psflow_ps_gradient_staleness_bucket{le=\"+Inf\"} 5\n"
            "psflow_ps_gradient_staleness_sum 8\n"
            "psflow_ps_gradient_staleness_count 5\n");
}

TEST(PrometheusTextTest, ValuesAndLabelsAreEscapedAndExact) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(GaugeFamily * g,
                       registry.Gauge("psflow_x", "X.", {"name"}));
  ASSERT_OK_AND_ASSIGN(GaugeCell * tiny, g->WithLabels({"tiny"}));
  tiny->Set(0.1);
  ASSERT_OK_AND_ASSIGN(GaugeCell * nan, g->WithLabels({"nan"}));
  nan->Set(std::nan(""));
  ASSERT_OK_AND_ASSIGN(GaugeCell * inf, g->WithLabels({"quote\""}));
  inf->Set(-1.0 / 0.0);
  const std::string text = PrometheusText(registry.Snapshot());
  EXPECT_THAT(text, ::testing::HasSubstr("psflow_x{name=\"tiny\"} 0.1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("psflow_x{name=\"nan\"} NaN\n"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("psflow_x{name=\"quote\\\"\"} -Inf\n"));
}

TEST(MirroredCellsTest, CountersRiseToTheirSourceAndNeverFall) {
  CounterCell cell;
  cell.IncreaseTo(10);
  cell.IncreaseTo(4);
  EXPECT_EQ(cell.Value(), 10);
  cell.IncreaseTo(12.5);
  EXPECT_EQ(cell.Value(), 12.5);
}

TEST(MirroredCellsTest, HistogramsTakeTheirSourcesBuckets) {
  const std::vector<double> bounds = {0, 1};
  HistogramCell cell(bounds);
  ASSERT_OK(cell.MirrorFrom(std::vector<uint64_t>{3, 2, 1}, 7));
  SeriesSnapshot read = cell.Read();
  EXPECT_THAT(read.bucket_counts, ::testing::ElementsAre(3, 2, 1));
  EXPECT_EQ(read.count, 6u);
  EXPECT_EQ(read.sum, 7);
  EXPECT_THAT(cell.MirrorFrom(std::vector<uint64_t>{1, 2}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cell.Read().bucket_counts, ::testing::ElementsAre(3, 2, 1));
}

}  // namespace
}  // namespace psflow
