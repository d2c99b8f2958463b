#include "chief/chief_metrics.h"

#include "common/metrics/prometheus_text.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

TEST(ChiefMetricsTest, ScrapesReadTheCoordinatorsViewOfTheJob) {
  JobCoordinator::Options options;
  options.num_workers = 3;
  JobCoordinator coordinator(options);
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(auto handle,
                       ExportChiefMetrics(&registry, &coordinator));
  JobSpec spec;
  spec.set_total_steps(100);
  spec.set_num_workers(3);
  coordinator.SetSpec(spec);
  ProgressReport report;
  report.set_worker_index(0);
  report.set_global_step(42);
  report.set_generation(coordinator.Status().generation());
  report.set_examples_per_sec(1000);
  coordinator.Progress(report);
  report.set_worker_index(1);
  report.set_finished(true);
  coordinator.Progress(report);
  EvaluationReport evaluation;
  evaluation.set_accuracy(0.875);
  ASSERT_OK(coordinator.Evaluation(evaluation));

  registry.Refresh();
  const std::string text = PrometheusText(registry.Snapshot());
  EXPECT_THAT(text, HasSubstr("psflow_chief_global_step 42\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_total_steps 100\n"));
  EXPECT_THAT(text,
              HasSubstr("psflow_chief_job_state{state=\"training\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_job_state{state=\"failed\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_workers{state=\"training\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_workers{state=\"finished\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_workers{state=\"missing\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_examples_per_second 1000\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_test_accuracy 0.875\n"));

  // Once the handle is gone, refreshing no longer reads the coordinator.
  handle.reset();
  coordinator.Fail("stop");
  registry.Refresh();
  EXPECT_THAT(PrometheusText(registry.Snapshot()),
              HasSubstr("psflow_chief_job_state{state=\"training\"} 1\n"));
}

TEST(ChiefMetricsTest, CheckpointSavesAreCountedAndMeasured) {
  MetricsRegistry registry;
  ASSERT_OK_AND_ASSIGN(auto metrics, CheckpointMetrics::Create(&registry));
  SavedCheckpoint saved;
  saved.step = 300;
  saved.bytes = 4096;
  saved.elapsed = absl::Milliseconds(250);
  metrics->Record(saved);
  metrics->Record(absl::DataLossError("disk full"));
  const std::string text = PrometheusText(registry.Snapshot());
  EXPECT_THAT(text, HasSubstr("psflow_chief_checkpoints_total{outcome="
                              "\"saved\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_checkpoints_total{outcome="
                              "\"failed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_checkpoint_seconds_sum 0.25\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_checkpoint_bytes 4096\n"));
  EXPECT_THAT(text, HasSubstr("psflow_chief_checkpoint_step 300\n"));
}

}  // namespace
}  // namespace psflow
