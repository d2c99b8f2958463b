#include "common/metrics/metrics_registry.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

// std::atomic<double>::fetch_add is C++20.
void AtomicAdd(std::atomic<double>& target, double amount) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount,
                                       std::memory_order_relaxed)) {
  }
}

bool IsNameChar(char c, bool first, bool allow_colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
    return true;
  }
  if (c == ':') return allow_colon;
  return !first && c >= '0' && c <= '9';
}

bool IsValidName(absl::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i], i == 0, allow_colon)) return false;
  }
  return true;
}

std::string LabelList(absl::Span<const std::string> names) {
  if (names.empty()) return "no labels";
  return absl::StrCat("labels {", absl::StrJoin(names, ", "), "}");
}

std::string BoundList(absl::Span<const double> bounds) {
  return absl::StrCat("bucket bounds {", absl::StrJoin(bounds, ", "), "}");
}

std::string QuotedValues(absl::Span<const std::string> values) {
  return absl::StrCat("{",
                      absl::StrJoin(values, ", ",
                                    [](std::string* out, const std::string& v) {
                                      absl::StrAppend(out, "\"", v, "\"");
                                    }),
                      "}");
}

absl::Status ValidateFamily(MetricType type, absl::string_view name,
                            const std::vector<std::string>& label_names,
                            const std::vector<double>& bucket_bounds) {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name \"", name,
                     "\" is invalid: use [a-zA-Z_:][a-zA-Z0-9_:]*, e.g. "
                     "psflow_ps_push_bytes_total"));
  }
  std::set<absl::string_view> seen;
  for (const std::string& label : label_names) {
    if (!IsValidLabelName(label)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric \"", name, "\": label name \"", label,
                       "\" is invalid: use [a-zA-Z_][a-zA-Z0-9_]*"));
    }
    if (absl::StartsWith(label, "__")) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric \"", name, "\": label name \"", label,
                       "\" is reserved (names starting with \"__\" are "
                       "Prometheus's own); drop the leading underscores"));
    }
    if (type == MetricType::kHistogram && label == "le") {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram \"", name,
          "\": label name \"le\" is reserved for its buckets; rename it"));
    }
    if (!seen.insert(label).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric \"", name, "\": label name \"", label,
                       "\" appears twice in ", LabelList(label_names)));
    }
  }
  for (size_t i = 0; i < bucket_bounds.size(); ++i) {
    const double bound = bucket_bounds[i];
    if (!std::isfinite(bound)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram \"", name, "\": bucket bound ", bound,
          " is not finite; give finite bounds (the +Inf bucket is implicit)"));
    }
    if (i > 0 && !(bucket_bounds[i - 1] < bound)) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram \"", name, "\": ", BoundList(bucket_bounds),
                       " must be strictly increasing (", bucket_bounds[i - 1],
                       " then ", bound, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "unknown";
}

bool IsValidMetricName(absl::string_view name) {
  return IsValidName(name, /*allow_colon=*/true);
}

bool IsValidLabelName(absl::string_view name) {
  return IsValidName(name, /*allow_colon=*/false);
}

// --- Cells ------------------------------------------------------------------

void CounterCell::AddDouble(double amount) { AtomicAdd(fractional_, amount); }

void CounterCell::IncreaseTo(double total) {
  const double now = Value();
  if (total > now) AddDouble(total - now);
}

double CounterCell::Value() const {
  return static_cast<double>(integral_.load(std::memory_order_relaxed)) +
         fractional_.load(std::memory_order_relaxed);
}

SeriesSnapshot CounterCell::Read() const {
  SeriesSnapshot series;
  series.value = Value();
  return series;
}

void GaugeCell::Add(double amount) { AtomicAdd(value_, amount); }

SeriesSnapshot GaugeCell::Read() const {
  SeriesSnapshot series;
  series.value = Value();
  return series;
}

HistogramCell::HistogramCell(absl::Span<const double> bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    buckets_[i].store(0, std::memory_order_relaxed);
  }
}

void HistogramCell::Observe(double value) {
  // The first bound >= value: upper bounds are inclusive.
  const size_t bucket =
      std::isnan(value)
          ? bounds_.size()
          : std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                bounds_.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, value);
}

absl::Status HistogramCell::MirrorFrom(absl::Span<const uint64_t> bucket_counts,
                                       double sum) {
  if (bucket_counts.size() != bounds_.size() + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("histogram of ", bounds_.size() + 1,
                     " buckets mirrored from ", bucket_counts.size()));
  }
  for (size_t i = 0; i < bucket_counts.size(); ++i) {
    buckets_[i].store(bucket_counts[i], std::memory_order_relaxed);
  }
  sum_.store(sum, std::memory_order_relaxed);
  return absl::OkStatus();
}

SeriesSnapshot HistogramCell::Read() const {
  SeriesSnapshot series;
  series.bucket_counts.reserve(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    const uint64_t n = buckets_[i].load(std::memory_order_relaxed);
    series.bucket_counts.push_back(n);
    series.count += n;
  }
  series.sum = sum_.load(std::memory_order_relaxed);
  return series;
}

// --- Families ---------------------------------------------------------------

MetricFamily::MetricFamily(MetricType type, std::string name, std::string help,
                           std::vector<std::string> label_names,
                           std::vector<double> bucket_bounds, size_t max_series)
    : type_(type),
      name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      bucket_bounds_(std::move(bucket_bounds)),
      max_series_(std::max<size_t>(1, max_series)) {}

absl::StatusOr<MetricCell*> MetricFamily::GetOrCreateCell(
    absl::Span<const std::string> label_values) {
  if (label_values.size() != label_names_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric \"", name_, "\" has ", LabelList(label_names_), " but ",
        label_values.size(), " label values were given ",
        QuotedValues(label_values), "; give one value per label, in order"));
  }
  std::vector<std::string> key(label_values.begin(), label_values.end());
  MutexLock lock(&mu_);
  auto it = cells_.find(key);
  if (it != cells_.end()) return it->second.get();
  if (cells_.size() >= max_series_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "metric \"", name_, "\" already has ", cells_.size(),
        " label combinations (the limit per metric); refusing ",
        QuotedValues(label_values),
        ": a label probably takes unbounded values (an id, a step); bound "
        "it, or raise MetricsRegistryOptions::max_series_per_family"));
  }
  std::unique_ptr<MetricCell>& cell = cells_[std::move(key)];
  cell = NewCell();
  return cell.get();
}

FamilySnapshot MetricFamily::Snapshot() const {
  FamilySnapshot family;
  family.type = type_;
  family.name = name_;
  family.help = help_;
  family.label_names = label_names_;
  family.bucket_bounds = bucket_bounds_;
  MutexLock lock(&mu_);
  family.series.reserve(cells_.size());
  for (const auto& [label_values, cell] : cells_) {
    family.series.push_back(cell->Read());
    family.series.back().label_values = label_values;
  }
  return family;
}

absl::StatusOr<CounterCell*> CounterFamily::WithLabels(
    absl::Span<const std::string> label_values) {
  absl::StatusOr<MetricCell*> cell = GetOrCreateCell(label_values);
  if (!cell.ok()) return cell.status();
  return static_cast<CounterCell*>(*cell);
}

std::unique_ptr<MetricCell> CounterFamily::NewCell() const {
  return std::make_unique<CounterCell>();
}

absl::StatusOr<GaugeCell*> GaugeFamily::WithLabels(
    absl::Span<const std::string> label_values) {
  absl::StatusOr<MetricCell*> cell = GetOrCreateCell(label_values);
  if (!cell.ok()) return cell.status();
  return static_cast<GaugeCell*>(*cell);
}

std::unique_ptr<MetricCell> GaugeFamily::NewCell() const {
  return std::make_unique<GaugeCell>();
}

absl::StatusOr<HistogramCell*> HistogramFamily::WithLabels(
    absl::Span<const std::string> label_values) {
  absl::StatusOr<MetricCell*> cell = GetOrCreateCell(label_values);
  if (!cell.ok()) return cell.status();
  return static_cast<HistogramCell*>(*cell);
}

std::unique_ptr<MetricCell> HistogramFamily::NewCell() const {
  return std::make_unique<HistogramCell>(bucket_bounds());
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i) {
    bounds.push_back(bound);
    bound *= factor;
  }
  return bounds;
}

// --- Registry ---------------------------------------------------------------

MetricsRegistry::MetricsRegistry(MetricsRegistryOptions options)
    : options_(options) {}

absl::StatusOr<MetricFamily*> MetricsRegistry::GetOrCreateFamily(
    MetricType type, absl::string_view name, absl::string_view help,
    std::vector<std::string> label_names, std::vector<double> bucket_bounds) {
  absl::Status valid = ValidateFamily(type, name, label_names, bucket_bounds);
  if (!valid.ok()) return valid;
  MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    const MetricFamily& existing = *it->second;
    if (existing.type() != type) {
      return absl::AlreadyExistsError(absl::StrCat(
          "metric \"", name, "\" is already registered as a ",
          MetricTypeName(existing.type()), "; cannot register it as a ",
          MetricTypeName(type), " (give one of them another name)"));
    }
    if (existing.label_names() != label_names) {
      return absl::AlreadyExistsError(absl::StrCat(
          "metric \"", name, "\" is already registered with ",
          LabelList(existing.label_names()), "; cannot register it with ",
          LabelList(label_names), " (use the same label names everywhere)"));
    }
    if (existing.bucket_bounds() != bucket_bounds) {
      return absl::AlreadyExistsError(absl::StrCat(
          "histogram \"", name, "\" is already registered with ",
          BoundList(existing.bucket_bounds()), "; cannot register it with ",
          BoundList(bucket_bounds), " (use the same bounds everywhere)"));
    }
    return it->second.get();
  }
  std::unique_ptr<MetricFamily> family;
  const bool unlabeled = label_names.empty();
  std::string owned_name(name);
  switch (type) {
    case MetricType::kCounter:
      family.reset(new CounterFamily(type, owned_name, std::string(help),
                                     std::move(label_names), {},
                                     options_.max_series_per_family));
      break;
    case MetricType::kGauge:
      family.reset(new GaugeFamily(type, owned_name, std::string(help),
                                   std::move(label_names), {},
                                   options_.max_series_per_family));
      break;
    case MetricType::kHistogram:
      family.reset(new HistogramFamily(
          type, owned_name, std::string(help), std::move(label_names),
          std::move(bucket_bounds), options_.max_series_per_family));
      break;
  }
  if (unlabeled) {
    // Its one series exists from the start, so sinks show 0 rather than
    // nothing until the first update. Cannot fail: no labels, limit >= 1.
    absl::StatusOr<MetricCell*> cell = family->GetOrCreateCell({});
    CHECK(cell.ok()) << cell.status();
  }
  MetricFamily* result = family.get();
  families_.emplace(std::move(owned_name), std::move(family));
  return result;
}

absl::StatusOr<CounterFamily*> MetricsRegistry::Counter(
    absl::string_view name, absl::string_view help,
    std::vector<std::string> label_names) {
  absl::StatusOr<MetricFamily*> family = GetOrCreateFamily(
      MetricType::kCounter, name, help, std::move(label_names), {});
  if (!family.ok()) return family.status();
  return static_cast<CounterFamily*>(*family);
}

absl::StatusOr<GaugeFamily*> MetricsRegistry::Gauge(
    absl::string_view name, absl::string_view help,
    std::vector<std::string> label_names) {
  absl::StatusOr<MetricFamily*> family = GetOrCreateFamily(
      MetricType::kGauge, name, help, std::move(label_names), {});
  if (!family.ok()) return family.status();
  return static_cast<GaugeFamily*>(*family);
}

absl::StatusOr<HistogramFamily*> MetricsRegistry::Histogram(
    absl::string_view name, absl::string_view help,
    std::vector<std::string> label_names, std::vector<double> bucket_bounds) {
  absl::StatusOr<MetricFamily*> family =
      GetOrCreateFamily(MetricType::kHistogram, name, help,
                        std::move(label_names), std::move(bucket_bounds));
  if (!family.ok()) return family.status();
  return static_cast<HistogramFamily*>(*family);
}

MetricsSnapshot MetricsRegistry::Snapshot() const {
  // Families are never removed: read them without holding mu_, so a slow
  // snapshot never blocks registration.
  std::vector<const MetricFamily*> families;
  {
    MutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_) {
      families.push_back(family.get());
    }
  }
  MetricsSnapshot snapshot;
  snapshot.families.reserve(families.size());
  for (const MetricFamily* family : families) {
    snapshot.families.push_back(family->Snapshot());
  }
  return snapshot;
}

absl::StatusOr<CounterCell*> MetricsRegistry::UnlabeledCounter(
    absl::string_view name, absl::string_view help) {
  ASSIGN_OR_RETURN(CounterFamily * family, Counter(name, help));
  return family->WithLabels({});
}

absl::StatusOr<GaugeCell*> MetricsRegistry::UnlabeledGauge(
    absl::string_view name, absl::string_view help) {
  ASSIGN_OR_RETURN(GaugeFamily * family, Gauge(name, help));
  return family->WithLabels({});
}

absl::StatusOr<HistogramCell*> MetricsRegistry::UnlabeledHistogram(
    absl::string_view name, absl::string_view help,
    std::vector<double> bucket_bounds) {
  ASSIGN_OR_RETURN(HistogramFamily * family,
                   Histogram(name, help, {}, std::move(bucket_bounds)));
  return family->WithLabels({});
}

std::unique_ptr<MetricsRegistry::RefresherHandle> MetricsRegistry::AddRefresher(
    std::function<void()> refresh) {
  MutexLock lock(&refresh_mu_);
  const uint64_t id = next_refresher_++;
  refreshers_[id] = std::move(refresh);
  return std::unique_ptr<RefresherHandle>(new RefresherHandle(this, id));
}

MetricsRegistry::RefresherHandle::~RefresherHandle() {
  MutexLock lock(&registry_->refresh_mu_);
  registry_->refreshers_.erase(id_);
}

void MetricsRegistry::Refresh() {
  MutexLock lock(&refresh_mu_);
  for (auto& [id, refresh] : refreshers_) refresh();
}

}  // namespace psflow
