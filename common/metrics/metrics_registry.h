// The one place a process records its metrics. Each role creates one
// MetricsRegistry and passes it down (no singletons, so a whole cluster can
// run in one test process); sinks read it through Snapshot(): the
// TensorBoard event file today (tensorboard_sink.h), a Prometheus text
// endpoint later.
//
//   MetricsRegistry registry;
//   ASSIGN_OR_RETURN(CounterFamily* push_bytes,
//                    registry.Counter("psflow_ps_push_bytes_total",
//                                     "Bytes of gradients received.", {"ps"}));
//   ASSIGN_OR_RETURN(CounterCell* ps0, push_bytes->WithLabels({"0"}));
//   ps0->Add(request.ByteSizeLong());  // hot path: one atomic add
//
// Naming (Prometheus conventions, checked where they are rules):
//   - psflow_<role>_<what>_<unit>: psflow_ps_push_bytes_total,
//     psflow_worker_step_seconds, psflow_client_pull_retries_total.
//   - Base units: seconds, bytes, ratios in 0..1; the unit is spelled out.
//   - Counters end in _total. Histograms are named without a suffix (the
//     exposition adds _bucket, _sum and _count); keep other names from
//     ending in those (not checked).
//   - Labels take bounded values (a task index, a variable name, a status
//     code), never an id or a step; each family holds at most
//     MetricsRegistryOptions::max_series_per_family label combinations.
//   Names must match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
//   [a-zA-Z_][a-zA-Z0-9_]* and must not start with "__"; histograms may not
//   use the label "le".
//
// Ownership: the registry owns every family and cell; the pointers it
// returns stay valid, at the same address, for the registry's lifetime
// (nothing is ever removed), so callers look a cell up once and keep it.
//
// Thread safety: everything is thread-safe. Updating a cell (Add, Set,
// Observe) is lock-free: relaxed atomics, no allocation. Registering a
// family or looking up a cell takes a mutex; do it at setup, or cache the
// pointer, rather than on every update. Snapshot() reads each value
// atomically but not all of them at one instant (a histogram's sum may lag
// its buckets by an observation in flight).
#ifndef PSFLOW_COMMON_METRICS_METRICS_REGISTRY_H_
#define PSFLOW_COMMON_METRICS_METRICS_REGISTRY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/mutex.h"

namespace psflow {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge" or "histogram", as in Prometheus's # TYPE line.
absl::string_view MetricTypeName(MetricType type);

// Prometheus's rules for metric and label names (see the top of this file).
bool IsValidMetricName(absl::string_view name);
bool IsValidLabelName(absl::string_view name);

// One series of a family, as read by Snapshot().
struct SeriesSnapshot {
  // In the order of the family's label_names.
  std::vector<std::string> label_values;
  // Counters and gauges.
  double value = 0;
  // Histograms. bucket_counts[i] counts the observations v with
  // bucket_bounds[i-1] < v <= bucket_bounds[i]; the last entry is the +Inf
  // bucket. Per bucket, not cumulative: Prometheus's _bucket{le=...} series
  // are prefix sums. count is the sum of bucket_counts; sum may miss an
  // observation that was in flight while the snapshot was taken.
  std::vector<uint64_t> bucket_counts;
  uint64_t count = 0;
  double sum = 0;
};

// One family (a metric name with its help, labels and series).
struct FamilySnapshot {
  MetricType type = MetricType::kCounter;
  std::string name;
  std::string help;
  std::vector<std::string> label_names;
  std::vector<double> bucket_bounds;   // histograms only; increasing
  std::vector<SeriesSnapshot> series;  // sorted by label values
};

// Everything a registry holds, for sinks.
struct MetricsSnapshot {
  std::vector<FamilySnapshot> families;  // sorted by name
};

// A series' storage; the registry creates them, callers use the subclasses.
class MetricCell {
 public:
  virtual ~MetricCell() = default;
  MetricCell(const MetricCell&) = delete;
  MetricCell& operator=(const MetricCell&) = delete;

  // The cell's value fields (label_values left empty).
  virtual SeriesSnapshot Read() const = 0;

 protected:
  MetricCell() = default;
};

// A monotonic count. Integer amounts are kept exactly in an int64; fractional
// ones (seconds) in a double; Value() is their sum.
class CounterCell final : public MetricCell {
 public:
  CounterCell() = default;

  // Adds `amount` (any integer or floating-point type). A counter never goes
  // down: negative and NaN amounts are ignored.
  template <typename T>
  void Add(T amount) {
    static_assert(std::is_arithmetic<T>::value, "Add takes a number");
    if constexpr (std::is_integral<T>::value) {
      if constexpr (std::is_signed<T>::value) {
        if (amount < 0) return;
      }
      integral_.fetch_add(static_cast<int64_t>(amount),
                          std::memory_order_relaxed);
    } else {
      if (!(amount >= 0)) return;  // also NaN
      AddDouble(static_cast<double>(amount));
    }
  }
  void Increment() { Add(int64_t{1}); }

  // Raises the count to `total` when it is below (for counts kept
  // elsewhere, copied in when the registry is read); never lowers it.
  // Meant for one refreshing thread per cell.
  void IncreaseTo(double total);

  double Value() const;
  SeriesSnapshot Read() const override;

 private:
  void AddDouble(double amount);

  std::atomic<int64_t> integral_{0};
  std::atomic<double> fractional_{0};
};

// A value that goes up and down (queue length, bytes in use).
class GaugeCell final : public MetricCell {
 public:
  GaugeCell() = default;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount);  // negative amounts subtract

  double Value() const { return value_.load(std::memory_order_relaxed); }
  SeriesSnapshot Read() const override;

 private:
  std::atomic<double> value_{0};
};

// Counts observations into fixed buckets (upper bounds inclusive, as
// Prometheus's "le") and keeps their sum.
class HistogramCell final : public MetricCell {
 public:
  // `bounds` must outlive the cell (the family owns them).
  explicit HistogramCell(absl::Span<const double> bounds);

  // A NaN lands in the +Inf bucket and makes the sum NaN, as in Prometheus.
  void Observe(double value);

  // Replaces the counts with ones kept elsewhere, copied in when the
  // registry is read: one count per bound plus the +Inf bucket
  // (InvalidArgument otherwise, nothing changed). For one refreshing
  // thread per cell.
  absl::Status MirrorFrom(absl::Span<const uint64_t> bucket_counts, double sum);

  SeriesSnapshot Read() const override;

 private:
  const absl::Span<const double> bounds_;
  // bounds_.size() + 1 entries, the last for +Inf.
  const std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
};

// A metric name with its help, label names and one cell per combination of
// label values. Created by MetricsRegistry; see the subclasses.
class MetricFamily {
 public:
  virtual ~MetricFamily() = default;
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;

  // Constant after construction.
  MetricType type() const { return type_; }
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  const std::vector<double>& bucket_bounds() const { return bucket_bounds_; }

  // The family and all its series as they are now.
  FamilySnapshot Snapshot() const;

 protected:
  MetricFamily(MetricType type, std::string name, std::string help,
               std::vector<std::string> label_names,
               std::vector<double> bucket_bounds, size_t max_series);

  // The cell for `label_values`, created on first use. InvalidArgument when
  // the number of values differs from label_names(); ResourceExhausted when
  // a new combination would exceed max_series.
  absl::StatusOr<MetricCell*> GetOrCreateCell(
      absl::Span<const std::string> label_values);

 private:
  friend class MetricsRegistry;  // creates the series of unlabeled families

  virtual std::unique_ptr<MetricCell> NewCell() const = 0;

  const MetricType type_;
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bucket_bounds_;
  const size_t max_series_;

  mutable Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<MetricCell>> cells_
      ABSL_GUARDED_BY(mu_);
};

class CounterFamily final : public MetricFamily {
 public:
  // The cell for one value per label name, in order ({} when the family has
  // no labels). Errors as MetricFamily::GetOrCreateCell.
  absl::StatusOr<CounterCell*> WithLabels(
      absl::Span<const std::string> label_values);

 private:
  friend class MetricsRegistry;
  using MetricFamily::MetricFamily;
  std::unique_ptr<MetricCell> NewCell() const override;
};

class GaugeFamily final : public MetricFamily {
 public:
  absl::StatusOr<GaugeCell*> WithLabels(
      absl::Span<const std::string> label_values);

 private:
  friend class MetricsRegistry;
  using MetricFamily::MetricFamily;
  std::unique_ptr<MetricCell> NewCell() const override;
};

class HistogramFamily final : public MetricFamily {
 public:
  absl::StatusOr<HistogramCell*> WithLabels(
      absl::Span<const std::string> label_values);

 private:
  friend class MetricsRegistry;
  using MetricFamily::MetricFamily;
  std::unique_ptr<MetricCell> NewCell() const override;
};

// `count` bucket bounds start, start*factor, start*factor^2, ... (latencies,
// sizes). Meant for start > 0 and factor > 1; other values give bounds that
// MetricsRegistry::Histogram rejects (not increasing).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

struct MetricsRegistryOptions {
  // Label combinations one family may hold. A runaway label (a step, a
  // request id) then fails with ResourceExhausted instead of growing memory
  // without bound.
  size_t max_series_per_family = 10000;
};

class MetricsRegistry {
 public:
  MetricsRegistry() : MetricsRegistry(MetricsRegistryOptions()) {}
  explicit MetricsRegistry(MetricsRegistryOptions options);
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Each returns the family called `name`, registering it on first use; a
  // later call with the same type, label names (and bounds) returns the same
  // family and keeps the first help text. Errors:
  //   InvalidArgument: a name or label name breaks the naming rules, label
  //     names repeat, or histogram bounds are not finite and increasing.
  //   AlreadyExists: `name` is registered with another type, other label
  //     names or other bounds.
  // A family without labels has its single series (value 0) from the start.
  absl::StatusOr<CounterFamily*> Counter(
      absl::string_view name, absl::string_view help,
      std::vector<std::string> label_names = {});
  absl::StatusOr<GaugeFamily*> Gauge(absl::string_view name,
                                     absl::string_view help,
                                     std::vector<std::string> label_names = {});
  // `bucket_bounds`: the finite upper bounds, strictly increasing (may be
  // empty); the +Inf bucket is implicit.
  absl::StatusOr<HistogramFamily*> Histogram(
      absl::string_view name, absl::string_view help,
      std::vector<std::string> label_names, std::vector<double> bucket_bounds);

  // The single series of a family without labels, registering the family
  // on first use (errors as above).
  absl::StatusOr<CounterCell*> UnlabeledCounter(absl::string_view name,
                                                absl::string_view help);
  absl::StatusOr<GaugeCell*> UnlabeledGauge(absl::string_view name,
                                            absl::string_view help);
  absl::StatusOr<HistogramCell*> UnlabeledHistogram(
      absl::string_view name, absl::string_view help,
      std::vector<double> bucket_bounds);

  // Every family and series with its current value.
  MetricsSnapshot Snapshot() const;

  // Values kept elsewhere (a server's counters, the chief's view of the
  // job) are copied in by refreshers, run by Refresh() before a sink reads
  // the registry. A refresher runs until its handle is destroyed; the
  // destructor waits for a run in progress.
  class RefresherHandle {
   public:
    ~RefresherHandle();
    RefresherHandle(const RefresherHandle&) = delete;
    RefresherHandle& operator=(const RefresherHandle&) = delete;

   private:
    friend class MetricsRegistry;
    RefresherHandle(MetricsRegistry* registry, uint64_t id)
        : registry_(registry), id_(id) {}
    MetricsRegistry* const registry_;
    const uint64_t id_;
  };
  std::unique_ptr<RefresherHandle> AddRefresher(std::function<void()> refresh);
  // Runs every refresher, one at a time.
  void Refresh();

 private:
  absl::StatusOr<MetricFamily*> GetOrCreateFamily(
      MetricType type, absl::string_view name, absl::string_view help,
      std::vector<std::string> label_names, std::vector<double> bucket_bounds);

  const MetricsRegistryOptions options_;

  mutable Mutex mu_;
  // Families are never removed, so pointers to them stay valid.
  std::map<std::string, std::unique_ptr<MetricFamily>, std::less<>> families_
      ABSL_GUARDED_BY(mu_);
  // Held while refreshers run, so removing one waits for its run.
  Mutex refresh_mu_;
  std::map<uint64_t, std::function<void()>> refreshers_
      ABSL_GUARDED_BY(refresh_mu_);
  uint64_t next_refresher_ ABSL_GUARDED_BY(refresh_mu_) = 1;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_METRICS_REGISTRY_H_
