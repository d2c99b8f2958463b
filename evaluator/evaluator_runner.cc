#include "evaluator/evaluator_runner.h"

#include <algorithm>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cluster_client.h"
#include "common/file_util.h"
#include "common/job/job_config.h"
#include "common/logging.h"
#include "common/metrics/event_file_writer.h"
#include "common/metrics/system_metrics_logger.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "evaluation/test_data.h"
#include "evaluator/evaluator.h"
#include "evaluator/job_end_watch.h"

namespace psflow {

absl::Status RunEvaluator(const EvaluatorOptions& options) {
  std::mt19937_64 random(std::random_device{}());
  ASSIGN_OR_RETURN(JobSpec spec,
                   options.coordinator->Register(
                       options.tf_config.task, random(),
                       options.clock->Now() + options.startup_timeout));
  const JobConfig& job = spec.config();
  if (!HasTestData(job)) {
    LOG(WARNING) << "the job config names no test data; nothing to evaluate";
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(TestData test, LoadTestData(spec));
  ASSIGN_OR_RETURN(
      std::unique_ptr<ParameterClient> client,
      PlaceJobOnParameterServers(options.tf_config, spec, options.security));
  // One watch from here to the end: it asks the chief twice a second (the
  // chief tracks the evaluator's liveness by it, so a long evaluation never
  // looks like a lost evaluator), and closes the client once the job ended.
  // Armed before Configure: a job that ended while this evaluator loaded
  // its data may have stopped its servers, and Configure would wait for
  // them until its deadline. Whatever it hears, the evaluator's loop knows.
  Evaluator::Policy policy;
  policy.chief_timeout = options.chief_timeout;
  policy.recovery_timeout = options.recovery_timeout;
  JobEndWatch watch(options.coordinator, client.get(),
                    std::max(policy.poll_interval, absl::Milliseconds(500)),
                    policy.cancel_after_silence, options.clock);
  if (absl::Status configured = client->Configure(spec.ps_config());
      !configured.ok()) {
    if (std::optional<StatusResponse> ended = watch.JobEnded()) {
      if (ended->state() == SUCCEEDED) return absl::OkStatus();
      return absl::AbortedError(
          absl::StrCat("the job failed: ", ended->message()));
    }
    return configured;
  }
  LOG(INFO) << "evaluating on " << test.num_examples() << " examples every "
            << job.evaluation().every_secs() << "s on "
            << options.device->Describe();

  std::unique_ptr<EventFileWriter> metrics;
  {
    absl::StatusOr<std::unique_ptr<EventFileWriter>> writer =
        EventFileWriter::Create(
            MetricsDir(job, options.logdir, options.tf_config.task.ToString()));
    if (writer.ok()) {
      metrics = *std::move(writer);
    } else {
      LOG(WARNING) << "no metrics: " << writer.status().message();
    }
  }
  std::unique_ptr<SystemMetricsLogger> system_metrics;
  if (metrics != nullptr) {
    system_metrics = SystemMetricsLogger::StartOrWarn(
        DirName(metrics->path()), SystemMetricsLogger::Options());
  }
  Evaluator::Parts::LiveMetrics live;
  if (options.metrics_registry != nullptr) {
    MetricsRegistry& r = *options.metrics_registry;
    ASSIGN_OR_RETURN(live.loss,
                     r.UnlabeledGauge("psflow_evaluator_loss",
                                      "Test loss of the latest evaluation."));
    ASSIGN_OR_RETURN(
        live.accuracy,
        r.UnlabeledGauge("psflow_evaluator_accuracy",
                         "Test accuracy of the latest evaluation."));
    ASSIGN_OR_RETURN(
        live.global_step,
        r.UnlabeledGauge("psflow_evaluator_global_step",
                         "The global step the latest evaluation read."));
    ASSIGN_OR_RETURN(live.evaluations,
                     r.UnlabeledCounter("psflow_evaluator_evaluations_total",
                                        "Evaluations completed."));
    ASSIGN_OR_RETURN(
        live.skipped,
        r.UnlabeledCounter("psflow_evaluator_skipped_total",
                           "Live evaluations skipped because a parameter "
                           "server was lost or recovering."));
  }
  if (options.job_name != nullptr) options.job_name->Set(job.name());
  Evaluator::Parts parts;
  parts.spec = &spec;
  parts.coordinator = options.coordinator;
  parts.client = client.get();
  parts.device = options.device;
  if (test.ctr) {
    parts.ctr_test = &test.examples;
  } else {
    parts.test = &test.images;
  }
  parts.metrics = metrics.get();
  if (options.metrics_registry != nullptr) parts.live = &live;
  parts.job_end_watch = &watch;
  parts.clock = options.clock;
  return Evaluator(parts, policy).Run();
}

}  // namespace psflow
