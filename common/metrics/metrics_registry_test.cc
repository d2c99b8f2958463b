#include "common/metrics/metrics_registry.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Runs `body(thread_index)` on `n` threads and joins them.
template <typename F>
void OnThreads(int n, F body) {
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back(body, t);
  for (std::thread& thread : threads) thread.join();
}

TEST(MetricsRegistryTest, CountersFromManyThreadsAddUp) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(CounterFamily * family,
                       registry.Counter("psflow_test_bytes_total", "help"));
  ASSERT_OK_AND_ASSIGN(CounterCell * counter, family->WithLabels({}));
  constexpr int kThreads = 8;
  constexpr int kAdds = 20000;
  OnThreads(kThreads, [&](int) {
    for (int i = 0; i < kAdds; ++i) {
      counter->Add(3);
      counter->Add(0.5);
    }
  });
  EXPECT_EQ(counter->Value(), kThreads * kAdds * 3.5);
}

TEST(MetricsRegistryTest, CountersNeverGoDown) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(CounterFamily * family,
                       registry.Counter("psflow_test_total", "help"));
  ASSERT_OK_AND_ASSIGN(CounterCell * counter, family->WithLabels({}));
  counter->Add(uint64_t{5});
  counter->Increment();
  counter->Add(-2);
  counter->Add(-0.5);
  counter->Add(std::nan(""));
  EXPECT_EQ(counter->Value(), 6);
}

TEST(MetricsRegistryTest, GaugesAreSetAndMovedBothWays) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(GaugeFamily * family,
                       registry.Gauge("psflow_test_queue_length", "help"));
  ASSERT_OK_AND_ASSIGN(GaugeCell * gauge, family->WithLabels({}));
  gauge->Set(10);
  gauge->Add(-2.5);
  EXPECT_EQ(gauge->Value(), 7.5);
  OnThreads(4, [&](int) {
    for (int i = 0; i < 1000; ++i) gauge->Add(1);
  });
  EXPECT_EQ(gauge->Value(), 4007.5);
}

TEST(MetricsRegistryTest, HistogramCountsLandInTheirBuckets) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(
      HistogramFamily * family,
      registry.Histogram("psflow_test_seconds", "help", {}, {1, 2, 4}));
  ASSERT_OK_AND_ASSIGN(HistogramCell * histogram, family->WithLabels({}));
  // Upper bounds are inclusive ("le"), the last bucket is +Inf.
  for (double v : {0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 4.5, 100.0, -7.0}) {
    histogram->Observe(v);
  }
  const FamilySnapshot snapshot = family->Snapshot();
  ASSERT_EQ(snapshot.series.size(), 1u);
  const SeriesSnapshot& series = snapshot.series[0];
  EXPECT_THAT(series.bucket_counts, ElementsAre(3, 2, 2, 2));
  EXPECT_EQ(series.count, 9u);
  EXPECT_EQ(series.sum, 109.5);
  EXPECT_THAT(snapshot.bucket_bounds, ElementsAre(1, 2, 4));
}

TEST(MetricsRegistryTest, HistogramObservationsFromManyThreadsAddUp) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(
      HistogramFamily * family,
      registry.Histogram("psflow_test_seconds", "help", {"op"}, {10}));
  ASSERT_OK_AND_ASSIGN(HistogramCell * histogram, family->WithLabels({"a"}));
  OnThreads(8, [&](int t) {
    for (int i = 0; i < 10000; ++i) histogram->Observe(t < 4 ? 1 : 20);
  });
  const SeriesSnapshot series = family->Snapshot().series.at(0);
  EXPECT_THAT(series.bucket_counts, ElementsAre(40000, 40000));
  EXPECT_EQ(series.sum, 40000 * 1 + 40000 * 20);
}

TEST(MetricsRegistryTest, HistogramBoundsMustBeFiniteAndIncreasing) {
  MetricsRegistry registry;
  EXPECT_THAT(registry.Histogram("psflow_a_seconds", "h", {}, {1, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("strictly increasing")));
  EXPECT_THAT(registry.Histogram("psflow_b_seconds", "h", {}, {2, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("psflow_b_seconds")));
  EXPECT_THAT(
      registry.Histogram("psflow_c_seconds", "h", {},
                         {1, std::numeric_limits<double>::infinity()}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("implicit")));
  EXPECT_THAT(registry.Histogram("psflow_d_seconds", "h", {"le"}, {1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"le\" is reserved")));
}

TEST(MetricsRegistryTest, SameNameWithAnotherTypeIsRejected) {
  MetricsRegistry registry;
  ASSERT_OK(registry.Counter("psflow_test_total", "help").status());
  EXPECT_THAT(registry.Gauge("psflow_test_total", "help"),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("\"psflow_test_total\" is already registered "
                                 "as a counter; cannot register it as a "
                                 "gauge")));
  EXPECT_THAT(registry.Histogram("psflow_test_total", "help", {}, {1}),
              StatusIs(absl::StatusCode::kAlreadyExists));
}

TEST(MetricsRegistryTest, SameNameWithOtherLabelsOrBoundsIsRejected) {
  MetricsRegistry registry;
  ASSERT_OK(registry.Counter("psflow_test_total", "help", {"ps"}).status());
  EXPECT_THAT(registry.Counter("psflow_test_total", "help", {"ps", "shard"}),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("labels {ps}; cannot register it with "
                                 "labels {ps, shard}")));
  EXPECT_THAT(
      registry.Counter("psflow_test_total", "help"),
      StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("no labels")));
  ASSERT_OK(registry.Histogram("psflow_test_seconds", "h", {}, {1, 2}));
  EXPECT_THAT(registry.Histogram("psflow_test_seconds", "h", {}, {1, 3}),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("bucket bounds {1, 2}")));
}

TEST(MetricsRegistryTest, SameNameAndShapeReturnTheSameFamilyAndCells) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(CounterFamily * first,
                       registry.Counter("psflow_test_total", "first", {"ps"}));
  ASSERT_OK_AND_ASSIGN(CounterFamily * second,
                       registry.Counter("psflow_test_total", "other", {"ps"}));
  EXPECT_EQ(first, second);
  EXPECT_EQ(second->help(), "first");
  ASSERT_OK_AND_ASSIGN(CounterCell * a, first->WithLabels({"0"}));
  ASSERT_OK_AND_ASSIGN(CounterCell * b, second->WithLabels({"0"}));
  ASSERT_OK_AND_ASSIGN(CounterCell * c, second->WithLabels({"1"}));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(MetricsRegistryTest, LookupsFromManyThreadsShareOneCellPerLabelValue) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(CounterFamily * family,
                       registry.Counter("psflow_test_total", "help", {"ps"}));
  OnThreads(8, [&](int) {
    for (int i = 0; i < 1000; ++i) {
      absl::StatusOr<CounterCell*> cell =
          family->WithLabels({absl::StrCat(i % 10)});
      ASSERT_TRUE(cell.ok()) << cell.status();
      (*cell)->Increment();
    }
  });
  const FamilySnapshot snapshot = family->Snapshot();
  ASSERT_EQ(snapshot.series.size(), 10u);
  for (const SeriesSnapshot& series : snapshot.series) {
    EXPECT_EQ(series.value, 800) << series.label_values[0];
  }
}

TEST(MetricsRegistryTest, InvalidNamesAreRejected) {
  MetricsRegistry registry;
  for (const char* name : {"", "9lives", "psflow-ps", "psflow ps", "é"}) {
    EXPECT_THAT(
        registry.Counter(name, "help"),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("metric name")))
        << name;
  }
  EXPECT_OK(registry.Counter("_psflow:rule_total", "help"));
  for (const char* label : {"", "0ps", "p:s", "__name"}) {
    EXPECT_THAT(registry.Counter("psflow_test_total", "help", {label}),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("psflow_test_total")))
        << label;
  }
  EXPECT_THAT(
      registry.Gauge("psflow_test_bytes", "help", {"ps", "ps"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("appears twice")));
}

TEST(MetricsRegistryTest, WrongNumberOfLabelValuesIsInvalidArgument) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(
      GaugeFamily * family,
      registry.Gauge("psflow_test_bytes", "help", {"ps", "shard"}));
  EXPECT_THAT(family->WithLabels({"0"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"psflow_test_bytes\" has labels {ps, "
                                 "shard} but 1 label values were given")));
  EXPECT_THAT(family->WithLabels({"0", "1", "2"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(family->WithLabels({}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(MetricsRegistryTest, TooManyLabelCombinationsIsResourceExhausted) {
  MetricsRegistryOptions options;
  options.max_series_per_family = 3;
  MetricsRegistry registry(options);
  ASSERT_OK_AND_ASSIGN(
      CounterFamily * family,
      registry.Counter("psflow_test_total", "help", {"request_id"}));
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_OK(family->WithLabels({id}).status());
  }
  EXPECT_THAT(family->WithLabels({"d"}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("\"psflow_test_total\" already has 3")));
  // The series it has keep working.
  EXPECT_OK(family->WithLabels({"b"}));
  EXPECT_EQ(family->Snapshot().series.size(), 3u);
}

TEST(MetricsRegistryTest, UnlabeledFamiliesHaveTheirSeriesFromTheStart) {
  MetricsRegistry registry;
  ASSERT_OK(registry.Gauge("psflow_test_workers", "help"));
  ASSERT_OK(registry.Counter("psflow_test_total", "help", {"ps"}));
  const MetricsSnapshot snapshot = registry.Snapshot();
  ASSERT_EQ(snapshot.families.size(), 2u);
  ASSERT_EQ(snapshot.families[1].name, "psflow_test_workers");
  ASSERT_EQ(snapshot.families[1].series.size(), 1u);
  EXPECT_THAT(snapshot.families[1].series[0].label_values, IsEmpty());
  EXPECT_EQ(snapshot.families[1].series[0].value, 0);
  EXPECT_THAT(snapshot.families[0].series, IsEmpty());
}

TEST(MetricsRegistryTest, SnapshotListsEveryFamilyAndSeriesInOrder) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(
      CounterFamily * pushes,
      registry.Counter("psflow_ps_push_bytes_total", "Pushed bytes.", {"ps"}));
  ASSERT_OK_AND_ASSIGN(GaugeFamily * queue,
                       registry.Gauge("psflow_ps_queue_length", "Queued."));
  ASSERT_OK_AND_ASSIGN(
      HistogramFamily * latency,
      registry.Histogram("psflow_ps_apply_seconds", "Apply.", {"op"}, {0.1}));
  ASSERT_OK_AND_ASSIGN(CounterCell * ps1, pushes->WithLabels({"1"}));
  ASSERT_OK_AND_ASSIGN(CounterCell * ps0, pushes->WithLabels({"0"}));
  ps1->Add(100);
  ps0->Add(7);
  ASSERT_OK_AND_ASSIGN(GaugeCell * length, queue->WithLabels({}));
  length->Set(4);
  ASSERT_OK_AND_ASSIGN(HistogramCell * apply, latency->WithLabels({"sgd"}));
  apply->Observe(0.05);

  const MetricsSnapshot snapshot = registry.Snapshot();
  ASSERT_EQ(snapshot.families.size(), 3u);
  const FamilySnapshot& h = snapshot.families[0];
  EXPECT_EQ(h.name, "psflow_ps_apply_seconds");
  EXPECT_EQ(h.type, MetricType::kHistogram);
  EXPECT_EQ(h.help, "Apply.");
  EXPECT_THAT(h.label_names, ElementsAre("op"));
  ASSERT_EQ(h.series.size(), 1u);
  EXPECT_THAT(h.series[0].label_values, ElementsAre("sgd"));
  EXPECT_THAT(h.series[0].bucket_counts, ElementsAre(1, 0));
  const FamilySnapshot& c = snapshot.families[1];
  EXPECT_EQ(c.name, "psflow_ps_push_bytes_total");
  EXPECT_EQ(c.type, MetricType::kCounter);
  ASSERT_EQ(c.series.size(), 2u);
  EXPECT_THAT(c.series[0].label_values, ElementsAre("0"));
  EXPECT_EQ(c.series[0].value, 7);
  EXPECT_THAT(c.series[1].label_values, ElementsAre("1"));
  EXPECT_EQ(c.series[1].value, 100);
  const FamilySnapshot& g = snapshot.families[2];
  EXPECT_EQ(g.type, MetricType::kGauge);
  EXPECT_EQ(g.series.at(0).value, 4);
}

TEST(MetricsRegistryTest, ExponentialBucketsGrowByTheFactor) {
  EXPECT_THAT(ExponentialBuckets(0.5, 2, 4), ElementsAre(0.5, 1, 2, 4));
  // Bad arguments give bounds that Histogram() rejects.
  MetricsRegistry registry;
  EXPECT_THAT(registry.Histogram("psflow_test_seconds", "h", {},
                                 ExponentialBuckets(1, 0.5, 3)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psflow
