#include "common/metrics/prometheus_text.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psflow {
namespace {

// Go's float syntax, which Prometheus parses: NaN, +Inf, -Inf, or a
// number that reads back exactly.
std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  // The shortest of 15 to 17 digits that reads back exactly.
  for (int digits = 15; digits < 17; ++digits) {
    std::string text = absl::StrFormat("%.*g", digits, value);
    if (std::strtod(text.c_str(), nullptr) == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

// {a="x",b="y"} from the constant labels, the series' labels and `extra`
// (a histogram's le); empty when there are none.
std::string LabelSet(const MetricLabels& constant,
                     const std::vector<std::string>& names,
                     const std::vector<std::string>& values,
                     const std::pair<std::string, std::string>* extra) {
  std::string out;
  auto add = [&out](const std::string& name, const std::string& value) {
    absl::StrAppend(&out, out.empty() ? "{" : ",", name, "=\"",
                    EscapeLabelValue(value), "\"");
  };
  for (const auto& [name, value] : constant) add(name, value);
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    add(names[i], values[i]);
  }
  if (extra != nullptr) add(extra->first, extra->second);
  if (!out.empty()) out += "}";
  return out;
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PrometheusText(const MetricsSnapshot& snapshot,
                           const MetricLabels& constant_labels) {
  std::string out;
  for (const FamilySnapshot& family : snapshot.families) {
    absl::StrAppend(&out, "# HELP ", family.name, " ", EscapeHelp(family.help),
                    "\n# TYPE ", family.name, " ", MetricTypeName(family.type),
                    "\n");
    for (const SeriesSnapshot& series : family.series) {
      if (family.type != MetricType::kHistogram) {
        absl::StrAppend(&out, family.name,
                        LabelSet(constant_labels, family.label_names,
                                 series.label_values, nullptr),
                        " ", FormatValue(series.value), "\n");
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t b = 0; b < series.bucket_counts.size(); ++b) {
        cumulative += series.bucket_counts[b];
        const std::pair<std::string, std::string> le{
            "le", b < family.bucket_bounds.size()
                      ? FormatValue(family.bucket_bounds[b])
                      : "+Inf"};
        absl::StrAppend(&out, family.name, "_bucket",
                        LabelSet(constant_labels, family.label_names,
                                 series.label_values, &le),
                        " ", cumulative, "\n");
      }
      const std::string labels = LabelSet(constant_labels, family.label_names,
                                          series.label_values, nullptr);
      absl::StrAppend(&out, family.name, "_sum", labels, " ",
                      FormatValue(series.sum), "\n", family.name, "_count",
                      labels, " ", series.count, "\n");
    }
  }
  return out;
}

}  // namespace psflow
