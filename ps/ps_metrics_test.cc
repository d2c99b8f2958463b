#include "ps/ps_metrics.h"

#include <vector>

#include "common/metrics/prometheus_text.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "ps/ps_core.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

// A bounded-staleness server with two workers and one variable, its
// metrics, and pushes through the core.
class PsMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(metrics_, PsMetrics::Create(&registry_));
    ParameterServerCore::Options options;
    options.apply_seconds = metrics_->apply_seconds();
    core_ = std::make_unique<ParameterServerCore>(options);
    ConfigureRequest config;
    config.set_protocol_version(kProtocolVersion);
    config.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    config.mutable_learning_rate()->set_learning_rate(0.1);
    config.set_mode(BOUNDED);
    config.set_num_workers(2);
    config.set_max_staleness(3);
    config.set_job_name("mnist");
    ASSERT_OK(core_->Configure(config));
    CreateVariablesRequest create;
    create.set_protocol_version(kProtocolVersion);
    VariableSpec* w = create.add_variables();
    w->set_name("w");
    w->add_shape(4);
    ASSERT_OK(core_->CreateVariables(create));
  }

  std::string Scrape() {
    EXPECT_OK(metrics_->Refresh(core_->Stats(), core_->mode()));
    return PrometheusText(registry_.Snapshot(), {{"task_type", "ps"}});
  }

  MetricsRegistry registry_;
  std::unique_ptr<PsMetrics> metrics_;
  std::unique_ptr<ParameterServerCore> core_;
};

TEST_F(PsMetricsTest, ScrapesShowTheServersCountsAndTheyOnlyGrow) {
  ASSERT_OK_AND_ASSIGN(ChunkRef ref,
                       core_->Resolve(kProtocolVersion, "w", 0, 4));
  std::vector<float> ones(4, 1.0f);
  const absl::Span<const float> gradients[] = {ones};
  // Two pushes computed from version 0: staleness 0, then 1.
  ASSERT_OK(core_->PushBatch({ref}, 0, 0, gradients));
  ASSERT_OK(core_->PushBatch({ref}, 0, 1, gradients));
  const std::vector<float> bad = {1, 2, NAN, 4};
  const absl::Span<const float> nan[] = {bad};
  EXPECT_FALSE(core_->PushBatch({ref}, 0, 1, nan).ok());

  const std::string text = Scrape();
  EXPECT_EQ(core_->job_name(), "mnist");
  EXPECT_THAT(text, HasSubstr("psflow_ps_pushes_total{task_type=\"ps\","
                              "mode=\"bounded\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("psflow_ps_updates_applied_total{task_type="
                              "\"ps\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("psflow_ps_nonfinite_gradients_rejected_total{"
                              "task_type=\"ps\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psflow_ps_gradient_staleness_bucket{task_type="
                              "\"ps\",le=\"0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psflow_ps_gradient_staleness_bucket{task_type="
                              "\"ps\",le=\"1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("psflow_ps_gradient_staleness_count{task_type="
                              "\"ps\"} 2\n"));
  // The rejected batch applied nothing: two applies timed.
  EXPECT_THAT(text, HasSubstr("psflow_ps_apply_seconds_count{task_type="
                              "\"ps\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("psflow_ps_apply_seconds_bucket{task_type="
                              "\"ps\",le=\"1e-06\"} "));
  EXPECT_THAT(text, HasSubstr("psflow_ps_variable_bytes{task_type=\"ps\"} "
                              "16\n"));
  EXPECT_THAT(text, HasSubstr("psflow_ps_worker_clock{task_type=\"ps\","
                              "worker=\"1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("psflow_ps_worker_excluded{task_type=\"ps\","
                              "worker=\"0\"} 0\n"));
  // Counters are monotonic across scrapes.
  ASSERT_OK(core_->PushBatch({ref}, 2, 0, gradients));
  EXPECT_THAT(Scrape(), HasSubstr("psflow_ps_updates_applied_total{task_type="
                                  "\"ps\"} 3\n"));
}

TEST_F(PsMetricsTest, BeforeConfigureTheModeSaysSo) {
  ParameterServerCore fresh(ParameterServerCore::Options{});
  ASSERT_OK(metrics_->Refresh(fresh.Stats(), fresh.mode()));
  EXPECT_THAT(PrometheusText(registry_.Snapshot()),
              HasSubstr("psflow_ps_pulls_total{mode=\"unconfigured\"} 0\n"));
}

}  // namespace
}  // namespace psflow
