// The parameter server's Prometheus metrics (served at /metrics by
// ps_server --metrics_port). Counts the core already keeps (its Stats) are
// mirrored into the registry when a scrape reads it, so the hot path pays
// nothing for them; apply latency is observed where pushes are applied.
//
//   psflow_ps_pulls_total{mode}, psflow_ps_pushes_total{mode}
//       chunk parts pulled and pushed (mode: async, sync or bounded)
//   psflow_ps_updates_applied_total, psflow_ps_stale_gradients_dropped_total,
//   psflow_ps_nonfinite_gradients_rejected_total
//   psflow_ps_transferred_bytes_total{direction, transport}
//       tensor bytes in and out, over TCP or same-host shared memory
//   psflow_ps_gradient_staleness           histogram (updates behind)
//   psflow_ps_apply_seconds                histogram (one push batch)
//   psflow_ps_variables, psflow_ps_variable_bytes,
//   psflow_ps_shared_memory_sessions psflow_ps_worker_clock{worker},
//   psflow_ps_worker_excluded{worker}, psflow_ps_bounded_waits_total,
//   psflow_ps_bounded_wait_seconds_total
//       bounded staleness (BOUNDED mode only)
//
// Thread-safe: Refresh is called by the scrape thread only.
#ifndef PSFLOW_PS_PS_METRICS_H_
#define PSFLOW_PS_PS_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics/metrics_registry.h"
#include "proto/ps.pb.h"

namespace psflow {

class PsMetrics {
 public:
  // Registers every family in `registry`, which must outlive this.
  static absl::StatusOr<std::unique_ptr<PsMetrics>> Create(
      MetricsRegistry* registry);

  // Where pushes observe their apply time (for ParameterServerCore).
  HistogramCell* apply_seconds() const { return apply_seconds_; }

  // Copies `stats` (ParameterServerCore::Stats) and the update mode
  // (`mode`: UpdateMode, UPDATE_MODE_UNSPECIFIED before Configure) into
  // the registry.
  absl::Status Refresh(const StatsResponse& stats, UpdateMode mode);

 private:
  PsMetrics() = default;

  CounterFamily* pulls_ = nullptr;
  CounterFamily* pushes_ = nullptr;
  CounterCell* updates_ = nullptr;
  CounterCell* stale_ = nullptr;
  CounterCell* nonfinite_ = nullptr;
  CounterFamily* bytes_ = nullptr;
  HistogramCell* staleness_ = nullptr;
  HistogramCell* apply_seconds_ = nullptr;
  GaugeCell* variables_ = nullptr;
  GaugeCell* variable_bytes_ = nullptr;
  GaugeCell* sessions_ = nullptr;
  GaugeCell* rings_ = nullptr;
  CounterCell* ring_calls_ = nullptr;
  GaugeFamily* worker_clock_ = nullptr;
  GaugeFamily* worker_excluded_ = nullptr;
  CounterCell* bounded_waits_ = nullptr;
  CounterCell* bounded_wait_seconds_ = nullptr;
};

}  // namespace psflow

#endif  // PSFLOW_PS_PS_METRICS_H_
