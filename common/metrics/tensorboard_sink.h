// Writes a MetricsRegistry to a TensorBoard event file: every series becomes
// a scalar at the step the caller gives, tagged in Prometheus's readable
// form, so TensorBoard's tag filter finds a family by its name:
//
//   counter/gauge   psflow_ps_push_bytes_total{ps=0}
//   histogram       psflow_worker_step_seconds_sum{job=train}
//                   psflow_worker_step_seconds_count{job=train}
//   no labels       psflow_chief_workers
//
// Label values are written as they are (no quoting or escaping), so a value
// holding ',', '=' or '}' reads ambiguously; keep label values plain.
// Histograms are written as _sum and _count only: proto/tensorboard.proto
// carries scalars, not TensorBoard's histogram summaries.
//
// Roles also record plain scalars ("loss", "accuracy") through AddScalar,
// exactly as they do on an EventFileWriter today.
//
// Thread-safe (the writer is). Every write error comes back as a Status.
#ifndef PSFLOW_COMMON_METRICS_TENSORBOARD_SINK_H_
#define PSFLOW_COMMON_METRICS_TENSORBOARD_SINK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics/event_file_writer.h"
#include "common/metrics/metrics_registry.h"

namespace psflow {

// The tag of one series: family name, then `suffix` ("" or "_sum"/"_count"),
// then {label=value,...} when the family has labels.
std::string TensorBoardTag(const FamilySnapshot& family,
                           const SeriesSnapshot& series,
                           absl::string_view suffix = "");

class TensorBoardSink {
 public:
  // A sink writing to a new event file in `dir` (EventFileWriter::Create).
  static absl::StatusOr<std::unique_ptr<TensorBoardSink>> Create(
      const std::string& dir);
  // A sink writing to `writer`, which it owns. `writer` must not be null.
  explicit TensorBoardSink(std::unique_ptr<EventFileWriter> writer);

  // Writes every series of `snapshot` at `step` (all with `wall_time`), then
  // flushes, so TensorBoard sees the whole step. Stops at the first error
  // (DataLoss from the writer) and returns it.
  absl::Status WriteSnapshot(const MetricsSnapshot& snapshot, int64_t step,
                             absl::Time wall_time = absl::Now());
  // WriteSnapshot(registry.Snapshot(), step).
  absl::Status Write(const MetricsRegistry& registry, int64_t step);

  // One plain scalar, as EventFileWriter::AddScalar; buffered until Flush().
  absl::Status AddScalar(absl::string_view tag, int64_t step, double value,
                         absl::Time wall_time = absl::Now());
  absl::Status Flush();

  const std::string& path() const { return writer_->path(); }

 private:
  const std::unique_ptr<EventFileWriter> writer_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_TENSORBOARD_SINK_H_
