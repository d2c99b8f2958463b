#include "ps/ps_metrics.h"

#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/staleness_histogram.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<PsMetrics>> PsMetrics::Create(
    MetricsRegistry* registry) {
  std::unique_ptr<PsMetrics> m(new PsMetrics());
  MetricsRegistry& r = *registry;
  ASSIGN_OR_RETURN(m->pulls_, r.Counter("psflow_ps_pulls_total",
                                        "Chunk parts pulled.", {"mode"}));
  ASSIGN_OR_RETURN(m->pushes_, r.Counter("psflow_ps_pushes_total",
                                         "Chunk parts pushed.", {"mode"}));
  ASSIGN_OR_RETURN(m->updates_,
                   r.UnlabeledCounter("psflow_ps_updates_applied_total",
                                      "Updates applied (async: pushes; sync: "
                                      "aggregated steps), per chunk."));
  ASSIGN_OR_RETURN(m->stale_, r.UnlabeledCounter(
                                  "psflow_ps_stale_gradients_dropped_total",
                                  "Sync gradients dropped for an older step."));
  ASSIGN_OR_RETURN(
      m->nonfinite_,
      r.UnlabeledCounter("psflow_ps_nonfinite_gradients_rejected_total",
                         "Gradients rejected because they held NaN or Inf."));
  ASSIGN_OR_RETURN(m->bytes_,
                   r.Counter("psflow_ps_transferred_bytes_total",
                             "Tensor bytes received (in) and sent (out), "
                             "over TCP or same-host shared memory.",
                             {"direction", "transport"}));
  std::vector<double> staleness_bounds;
  for (int b = 0; b + 1 < StalenessHistogram::kBuckets; ++b) {
    staleness_bounds.push_back(
        static_cast<double>(StalenessHistogram::UpperBound(b)));
  }
  ASSIGN_OR_RETURN(m->staleness_,
                   r.UnlabeledHistogram("psflow_ps_gradient_staleness",
                                        "Updates a chunk received between the "
                                        "version a gradient was computed "
                                        "from and its application.",
                                        staleness_bounds));
  ASSIGN_OR_RETURN(
      m->apply_seconds_,
      r.UnlabeledHistogram("psflow_ps_apply_seconds",
                           "Time to check and apply one push batch "
                           "(batches rejected for NaN/Inf not counted).",
                           ExponentialBuckets(1e-6, 4, 12)));
  ASSIGN_OR_RETURN(m->variables_,
                   r.UnlabeledGauge("psflow_ps_variables", "Variables held."));
  ASSIGN_OR_RETURN(m->variable_bytes_,
                   r.UnlabeledGauge("psflow_ps_variable_bytes",
                                    "Bytes of variable values held (optimizer "
                                    "slots not included)."));
  ASSIGN_OR_RETURN(
      m->sessions_,
      r.UnlabeledGauge("psflow_ps_shared_memory_sessions",
                       "Same-host shared-memory regions attached."));
  ASSIGN_OR_RETURN(
      m->rings_,
      r.UnlabeledGauge("psflow_ps_shared_memory_rings",
                       "Shared-memory sessions whose pulls and pushes come "
                       "through a call ring instead of gRPC."));
  ASSIGN_OR_RETURN(
      m->ring_calls_,
      r.UnlabeledCounter("psflow_ps_shared_memory_ring_calls_total",
                         "Pulls and pushes taken from call rings."));
  ASSIGN_OR_RETURN(m->worker_clock_,
                   r.Gauge("psflow_ps_worker_clock",
                           "Bounded staleness: steps each worker has pushed "
                           "here.",
                           {"worker"}));
  ASSIGN_OR_RETURN(m->worker_excluded_,
                   r.Gauge("psflow_ps_worker_excluded",
                           "Bounded staleness: 1 when the chief excluded "
                           "the worker from the bound (lost, finished).",
                           {"worker"}));
  ASSIGN_OR_RETURN(
      m->bounded_waits_,
      r.UnlabeledCounter("psflow_ps_bounded_waits_total",
                         "Bounded staleness: pulls that waited for "
                         "a slower worker."));
  ASSIGN_OR_RETURN(m->bounded_wait_seconds_,
                   r.UnlabeledCounter("psflow_ps_bounded_wait_seconds_total",
                                      "Bounded staleness: seconds pulls waited "
                                      "for a slower worker."));
  return m;
}

absl::Status PsMetrics::Refresh(const StatsResponse& stats, UpdateMode mode) {
  const std::string mode_label =
      mode == UPDATE_MODE_UNSPECIFIED
          ? "unconfigured"
          : absl::AsciiStrToLower(UpdateMode_Name(mode));
  ASSIGN_OR_RETURN(CounterCell * pulls, pulls_->WithLabels({mode_label}));
  pulls->IncreaseTo(stats.pulls());
  ASSIGN_OR_RETURN(CounterCell * pushes, pushes_->WithLabels({mode_label}));
  pushes->IncreaseTo(stats.pushes());
  updates_->IncreaseTo(stats.updates_applied());
  stale_->IncreaseTo(stats.stale_gradients_dropped());
  nonfinite_->IncreaseTo(stats.nonfinite_gradients_rejected());
  // bytes_received/sent count TCP payloads; shared-memory bytes both ways
  // together (Stats has no split).
  ASSIGN_OR_RETURN(CounterCell * in_tcp, bytes_->WithLabels({"in", "tcp"}));
  in_tcp->IncreaseTo(stats.bytes_received());
  ASSIGN_OR_RETURN(CounterCell * out_tcp, bytes_->WithLabels({"out", "tcp"}));
  out_tcp->IncreaseTo(stats.bytes_sent());
  ASSIGN_OR_RETURN(CounterCell * shm,
                   bytes_->WithLabels({"both", "shared_memory"}));
  shm->IncreaseTo(stats.shared_memory_bytes());
  std::vector<uint64_t> counts(stats.staleness_counts().begin(),
                               stats.staleness_counts().end());
  if (!counts.empty()) {
    RETURN_IF_ERROR(staleness_->MirrorFrom(
        counts, static_cast<double>(stats.staleness_sum())));
  }
  variables_->Set(static_cast<double>(stats.num_variables()));
  variable_bytes_->Set(static_cast<double>(stats.total_elements()) *
                       sizeof(float));
  sessions_->Set(static_cast<double>(stats.shared_memory_sessions()));
  rings_->Set(static_cast<double>(stats.shared_memory_rings()));
  ring_calls_->IncreaseTo(stats.shared_memory_ring_calls());
  for (int i = 0; i < stats.worker_clocks_size(); ++i) {
    const std::string worker = absl::StrCat(i);
    ASSIGN_OR_RETURN(GaugeCell * clock, worker_clock_->WithLabels({worker}));
    clock->Set(static_cast<double>(stats.worker_clocks(i)));
    ASSIGN_OR_RETURN(GaugeCell * excluded,
                     worker_excluded_->WithLabels({worker}));
    excluded->Set(
        i < stats.worker_excluded_size() && stats.worker_excluded(i) ? 1 : 0);
  }
  bounded_waits_->IncreaseTo(stats.bounded_waits());
  bounded_wait_seconds_->IncreaseTo(stats.bounded_wait_seconds());
  return absl::OkStatus();
}

}  // namespace psflow
