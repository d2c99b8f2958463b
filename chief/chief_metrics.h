// The chief's Prometheus metrics, read from the job's coordinator whenever
// the registry is refreshed (a scrape):
//
//   psflow_chief_global_step, psflow_chief_total_steps
//   psflow_chief_job_state{state}     1 for the job's state, 0 for the rest
//   psflow_chief_workers{state}       workers missing, training, finished
//                                     and lost
//   psflow_chief_examples_per_second  over every worker's latest heartbeat
//   psflow_chief_test_accuracy, psflow_chief_test_loss
//                                     the evaluator's latest report
//   psflow_chief_checkpoints_total{outcome}  saves (saved, failed)
//   psflow_chief_checkpoint_seconds   histogram of save durations
//   psflow_chief_checkpoint_bytes, psflow_chief_checkpoint_step
//                                     the latest saved checkpoint
#ifndef PSFLOW_CHIEF_CHIEF_METRICS_H_
#define PSFLOW_CHIEF_CHIEF_METRICS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_manager.h"
#include "chief/job_coordinator.h"
#include "common/metrics/metrics_registry.h"

namespace psflow {

// Checkpoint saves, recorded as they happen (CheckpointMetrics::Record).
struct CheckpointMetrics {
  static absl::StatusOr<std::unique_ptr<CheckpointMetrics>> Create(
      MetricsRegistry* registry);
  // One save's outcome.
  void Record(const absl::StatusOr<SavedCheckpoint>& saved) const;

  CounterCell* saved = nullptr;
  CounterCell* failed = nullptr;
  HistogramCell* seconds = nullptr;
  GaugeCell* bytes = nullptr;
  GaugeCell* step = nullptr;
};

// Registers the families and a refresher reading `coordinator`; both must
// outlive the returned handle, which stops the refreshing.
absl::StatusOr<std::unique_ptr<MetricsRegistry::RefresherHandle>>
ExportChiefMetrics(MetricsRegistry* registry,
                   const JobCoordinator* coordinator);

}  // namespace psflow

#endif  // PSFLOW_CHIEF_CHIEF_METRICS_H_
