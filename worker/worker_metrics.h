// A worker's Prometheus metrics (served at /metrics by worker
// --metrics_port), updated by the trainer as it steps:
//
//   psflow_worker_steps_total, psflow_worker_examples_total
//   psflow_worker_step_phase_seconds{phase}   histogram; phase: compute
//       (forward and backward), pull_wait (waiting for parameters: the
//       network, a sync step or a slower worker), push_wait (waiting for
//       the previous step's push to be acknowledged)
//   psflow_worker_loss, psflow_worker_accuracy   over the latest heartbeat
//       window's batches
//   psflow_worker_examples_per_second, psflow_worker_global_step
#ifndef PSFLOW_WORKER_WORKER_METRICS_H_
#define PSFLOW_WORKER_WORKER_METRICS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/metrics/metrics_registry.h"

namespace psflow {

struct WorkerMetrics {
  // Registers the families in `registry` (which must outlive the cells).
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Create(
      MetricsRegistry* registry);

  CounterCell* steps = nullptr;
  CounterCell* examples = nullptr;
  HistogramCell* compute_seconds = nullptr;
  HistogramCell* pull_wait_seconds = nullptr;
  HistogramCell* push_wait_seconds = nullptr;
  GaugeCell* loss = nullptr;
  GaugeCell* accuracy = nullptr;
  GaugeCell* examples_per_second = nullptr;
  GaugeCell* global_step = nullptr;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_WORKER_METRICS_H_
