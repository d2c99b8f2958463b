#include "worker/worker_metrics.h"

#include <string>

#include "common/status_macros.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(
    MetricsRegistry* registry) {
  auto m = std::make_unique<WorkerMetrics>();
  MetricsRegistry& r = *registry;
  ASSIGN_OR_RETURN(m->steps,
                   r.UnlabeledCounter("psflow_worker_steps_total",
                                      "Training steps this worker computed."));
  ASSIGN_OR_RETURN(
      m->examples,
      r.UnlabeledCounter("psflow_worker_examples_total",
                         "Training examples this worker computed on."));
  ASSIGN_OR_RETURN(
      HistogramFamily * phases,
      r.Histogram("psflow_worker_step_phase_seconds",
                  "Time of each step's phases: compute (forward and "
                  "backward), pull_wait (waiting for parameters) and "
                  "push_wait (waiting for the previous push).",
                  {"phase"}, ExponentialBuckets(1e-5, 4, 12)));
  ASSIGN_OR_RETURN(m->compute_seconds, phases->WithLabels({"compute"}));
  ASSIGN_OR_RETURN(m->pull_wait_seconds, phases->WithLabels({"pull_wait"}));
  ASSIGN_OR_RETURN(m->push_wait_seconds, phases->WithLabels({"push_wait"}));
  ASSIGN_OR_RETURN(m->loss,
                   r.UnlabeledGauge("psflow_worker_loss",
                                    "Training loss over the latest heartbeat "
                                    "window's batches."));
  ASSIGN_OR_RETURN(m->accuracy,
                   r.UnlabeledGauge("psflow_worker_accuracy",
                                    "Training accuracy over the latest "
                                    "heartbeat window's batches."));
  ASSIGN_OR_RETURN(
      m->examples_per_second,
      r.UnlabeledGauge("psflow_worker_examples_per_second",
                       "Examples per second over the latest heartbeat "
                       "window."));
  ASSIGN_OR_RETURN(
      m->global_step,
      r.UnlabeledGauge("psflow_worker_global_step",
                       "The global step of the parameters this worker "
                       "last pulled."));
  return m;
}

}  // namespace psflow
