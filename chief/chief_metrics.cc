#include "chief/chief_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "common/status_macros.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<CheckpointMetrics>> CheckpointMetrics::Create(
    MetricsRegistry* registry) {
  auto m = std::make_unique<CheckpointMetrics>();
  MetricsRegistry& r = *registry;
  ASSIGN_OR_RETURN(CounterFamily * saves,
                   r.Counter("psflow_chief_checkpoints_total",
                             "Checkpoint saves, by outcome.", {"outcome"}));
  ASSIGN_OR_RETURN(m->saved, saves->WithLabels({"saved"}));
  ASSIGN_OR_RETURN(m->failed, saves->WithLabels({"failed"}));
  ASSIGN_OR_RETURN(m->seconds, r.UnlabeledHistogram(
                                   "psflow_chief_checkpoint_seconds",
                                   "Time to save a checkpoint (every server's "
                                   "shard, fsyncs, the state file).",
                                   ExponentialBuckets(0.01, 2, 14)));
  ASSIGN_OR_RETURN(m->bytes,
                   r.UnlabeledGauge("psflow_chief_checkpoint_bytes",
                                    "Size of the latest saved checkpoint."));
  ASSIGN_OR_RETURN(
      m->step, r.UnlabeledGauge("psflow_chief_checkpoint_step",
                                "Global step of the latest saved checkpoint."));
  return m;
}

void CheckpointMetrics::Record(
    const absl::StatusOr<SavedCheckpoint>& result) const {
  if (!result.ok()) {
    failed->Increment();
    return;
  }
  saved->Increment();
  seconds->Observe(absl::ToDoubleSeconds(result->elapsed));
  bytes->Set(static_cast<double>(result->bytes));
  step->Set(static_cast<double>(result->step));
}

absl::StatusOr<std::unique_ptr<MetricsRegistry::RefresherHandle>>
ExportChiefMetrics(MetricsRegistry* registry,
                   const JobCoordinator* coordinator) {
  MetricsRegistry& r = *registry;
  ASSIGN_OR_RETURN(
      GaugeCell * global_step,
      r.UnlabeledGauge("psflow_chief_global_step",
                       "The job's global step (updates applied)."));
  ASSIGN_OR_RETURN(GaugeCell * total_steps,
                   r.UnlabeledGauge("psflow_chief_total_steps",
                                    "The global step at which training ends."));
  ASSIGN_OR_RETURN(GaugeCell * rate,
                   r.UnlabeledGauge("psflow_chief_examples_per_second",
                                    "Training examples per second over every "
                                    "worker's latest heartbeat."));
  ASSIGN_OR_RETURN(GaugeCell * accuracy,
                   r.UnlabeledGauge("psflow_chief_test_accuracy",
                                    "The evaluator's latest test accuracy."));
  ASSIGN_OR_RETURN(GaugeCell * loss,
                   r.UnlabeledGauge("psflow_chief_test_loss",
                                    "The evaluator's latest test "
                                    "loss."));
  ASSIGN_OR_RETURN(
      GaugeFamily * states,
      r.Gauge("psflow_chief_job_state",
              "1 for the job's current state, 0 for the others.", {"state"}));
  std::vector<std::pair<JobState, GaugeCell*>> state_cells;
  for (JobState state :
       {INITIALIZING, TRAINING, PAUSED, FINAL_EVALUATION, SUCCEEDED, FAILED}) {
    ASSIGN_OR_RETURN(
        GaugeCell * cell,
        states->WithLabels({absl::AsciiStrToLower(JobState_Name(state))}));
    state_cells.emplace_back(state, cell);
  }
  ASSIGN_OR_RETURN(GaugeFamily * workers,
                   r.Gauge("psflow_chief_workers",
                           "Workers by state: missing (never joined), "
                           "training, finished, lost.",
                           {"state"}));
  ASSIGN_OR_RETURN(GaugeCell * missing, workers->WithLabels({"missing"}));
  ASSIGN_OR_RETURN(GaugeCell * training, workers->WithLabels({"training"}));
  ASSIGN_OR_RETURN(GaugeCell * finished, workers->WithLabels({"finished"}));
  ASSIGN_OR_RETURN(GaugeCell * lost, workers->WithLabels({"lost"}));
  return registry->AddRefresher([=] {
    const StatusResponse status = coordinator->Status();
    global_step->Set(static_cast<double>(status.global_step()));
    total_steps->Set(static_cast<double>(status.total_steps()));
    for (const auto& [state, cell] : state_cells) {
      cell->Set(state == status.state() ? 1 : 0);
    }
    const JobCoordinator::WorkerCounts counts = coordinator->CountWorkers();
    missing->Set(counts.missing);
    training->Set(counts.training);
    finished->Set(counts.finished);
    lost->Set(counts.lost);
    double examples_per_second = 0;
    for (const ProgressReport& report : coordinator->LastReports()) {
      if (!report.finished()) examples_per_second += report.examples_per_sec();
    }
    rate->Set(examples_per_second);
    if (auto evaluation = coordinator->last_evaluation()) {
      accuracy->Set(evaluation->accuracy());
      loss->Set(evaluation->loss());
    }
  });
}

}  // namespace psflow
