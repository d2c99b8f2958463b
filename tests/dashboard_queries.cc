#include "tests/dashboard_queries.h"

#include <algorithm>
#include <cctype>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace psflow::testing {
namespace {

// PromQL's functions in Prometheus 2.42 (Debian 12's), start() and end()
// of the @ modifier included. Case-sensitive, as in PromQL.
const absl::flat_hash_set<std::string>& Functions() {
  static const auto* functions = new absl::flat_hash_set<std::string>{
      "abs",
      "absent",
      "absent_over_time",
      "acos",
      "acosh",
      "asin",
      "asinh",
      "atan",
      "atanh",
      "avg_over_time",
      "ceil",
      "changes",
      "clamp",
      "clamp_max",
      "clamp_min",
      "cos",
      "cosh",
      "count_over_time",
      "day_of_month",
      "day_of_week",
      "day_of_year",
      "days_in_month",
      "deg",
      "delta",
      "deriv",
      "end",
      "exp",
      "floor",
      "histogram_count",
      "histogram_fraction",
      "histogram_quantile",
      "histogram_sum",
      "holt_winters",
      "hour",
      "idelta",
      "increase",
      "irate",
      "label_join",
      "label_replace",
      "last_over_time",
      "ln",
      "log10",
      "log2",
      "max_over_time",
      "min_over_time",
      "minute",
      "month",
      "pi",
      "predict_linear",
      "present_over_time",
      "quantile_over_time",
      "rad",
      "rate",
      "resets",
      "round",
      "scalar",
      "sgn",
      "sin",
      "sinh",
      "sort",
      "sort_desc",
      "sqrt",
      "start",
      "stddev_over_time",
      "stdvar_over_time",
      "sum_over_time",
      "tan",
      "tanh",
      "time",
      "timestamp",
      "vector",
      "year",
  };
  return *functions;
}

// Keywords are case-insensitive in PromQL; these compare lowercased.
bool IsAggregation(const std::string& lower) {
  static const auto* aggregations = new absl::flat_hash_set<std::string>{
      "avg", "bottomk",  "count",  "count_values", "group", "max",
      "min", "quantile", "stddev", "stdvar",       "sum",   "topk",
  };
  return aggregations->contains(lower);
}

// Followed by a list of label names in parentheses.
bool IsGrouping(const std::string& lower) {
  return lower == "by" || lower == "without" || lower == "on" ||
         lower == "ignoring" || lower == "group_left" || lower == "group_right";
}

bool IsKeyword(const std::string& lower) {
  return lower == "bool" || lower == "offset" || lower == "and" ||
         lower == "or" || lower == "unless" || lower == "atan2";
}

// NaN and Inf are number literals, in any case.
bool IsNumberWord(const std::string& lower) {
  return lower == "nan" || lower == "inf";
}

bool IsIdentifierStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}

bool IsIdentifierChar(char c) {
  return IsIdentifierStart(c) || std::isdigit(static_cast<unsigned char>(c));
}

bool IsVariableChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// The index just past the string literal starting at `i` (a quote), or
// npos when it does not end.
size_t SkipString(absl::string_view s, size_t i) {
  const char quote = s[i];
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (s[j] == '\\' && quote != '`') {
      ++j;
    } else if (s[j] == quote) {
      return j + 1;
    }
  }
  return absl::string_view::npos;
}

// The index just past the Grafana variable starting at `i` (a `$`):
// `$name`, or `${...}`, whose name goes to `name`. `i + 1` (and an empty
// name) for a lone `$`; npos for an unterminated `${`.
size_t SkipVariable(absl::string_view s, size_t i, std::string* name) {
  name->clear();
  if (i + 1 < s.size() && s[i + 1] == '{') {
    const size_t close = s.find('}', i + 2);
    if (close == absl::string_view::npos) return close;
    absl::string_view inside = s.substr(i + 2, close - i - 2);
    *name = std::string(inside.substr(0, inside.find(':')));
    return close + 1;
  }
  size_t j = i + 1;
  while (j < s.size() && IsVariableChar(s[j])) ++j;
  *name = std::string(s.substr(i + 1, j - i - 1));
  return j;
}

size_t SkipSpace(absl::string_view s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

// Label matchers from just after `{` to just past their `}`; a
// `__name__="x"` matcher adds x to `names`. npos when unterminated.
size_t SkipMatchers(absl::string_view s, size_t i,
                    std::vector<std::string>* names) {
  std::string label;
  std::string op;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '}') return i + 1;
    if (c == '"' || c == '\'' || c == '`') {
      const size_t end = SkipString(s, i);
      if (end == absl::string_view::npos) return end;
      if (label == "__name__" && op == "=" && c != '`') {
        // Metric names hold no escapes, so the text between the quotes
        // is the name.
        names->emplace_back(s.substr(i + 1, end - i - 2));
      }
      label.clear();
      op.clear();
      i = end;
    } else if (IsIdentifierStart(c)) {
      const size_t start = i;
      while (i < s.size() && IsIdentifierChar(s[i])) ++i;
      label = std::string(s.substr(start, i - start));
      op.clear();
    } else if (c == '=' || c == '!' || c == '~') {
      op += c;
      ++i;
    } else {
      ++i;
    }
  }
  return absl::string_view::npos;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PromqlMetricNames(
    absl::string_view expr) {
  std::vector<std::string> found;
  auto unterminated = [&expr](size_t at, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PromQL \"", expr, "\": ", what, " at offset ", at, " does not end"));
  };
  size_t i = 0;
  while (i < expr.size()) {
    const char c = expr[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {  // a comment, to the end of the line
      const size_t end = expr.find('\n', i);
      i = end == absl::string_view::npos ? expr.size() : end;
    } else if (c == '"' || c == '\'' || c == '`') {
      const size_t end = SkipString(expr, i);
      if (end == absl::string_view::npos) return unterminated(i, "a string");
      i = end;
    } else if (c == '{') {
      const size_t end = SkipMatchers(expr, i + 1, &found);
      if (end == absl::string_view::npos) {
        return unterminated(i, "a label matcher {");
      }
      i = end;
    } else if (c == '[') {  // a range or subquery: durations, variables
      const size_t end = expr.find(']', i);
      if (end == absl::string_view::npos) return unterminated(i, "a range [");
      i = end + 1;
    } else if (c == '$') {
      std::string name;
      const size_t end = SkipVariable(expr, i, &name);
      if (end == absl::string_view::npos) {
        return unterminated(i, "a variable ${");
      }
      i = end;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < expr.size() &&
                std::isdigit(static_cast<unsigned char>(expr[i + 1])))) {
      // A number (1, 0.5, 1e-3, 0x1f) or a duration (5m, 1h30m).
      ++i;
      while (i < expr.size()) {
        const char d = expr[i];
        const bool exponent_sign = (d == '+' || d == '-') &&
                                   (expr[i - 1] == 'e' || expr[i - 1] == 'E');
        if (!std::isalnum(static_cast<unsigned char>(d)) && d != '.' &&
            d != '_' && !exponent_sign) {
          break;
        }
        ++i;
      }
    } else if (IsIdentifierStart(c)) {
      const size_t start = i;
      while (i < expr.size() && IsIdentifierChar(expr[i])) ++i;
      const std::string word(expr.substr(start, i - start));
      const std::string lower = absl::AsciiStrToLower(word);
      const size_t next = SkipSpace(expr, i);
      const bool call = next < expr.size() && expr[next] == '(';
      if (IsGrouping(lower)) {
        if (call) {  // label names, to the closing parenthesis
          const size_t close = expr.find(')', next);
          if (close == absl::string_view::npos) {
            return unterminated(next, absl::StrCat("the label list of ", word));
          }
          i = close + 1;
        }
      } else if (call) {
        if (!IsAggregation(lower) && !Functions().contains(word)) {
          return absl::InvalidArgumentError(
              absl::StrCat("PromQL \"", expr, "\": ", word,
                           "() is not a PromQL function or aggregation"));
        }
      } else if (!IsAggregation(lower) && !IsKeyword(lower) &&
                 !IsNumberWord(lower)) {
        found.push_back(word);
      }
    } else {
      ++i;  // operators, parentheses, commas, @
    }
  }
  std::vector<std::string> names;
  for (std::string& name : found) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(std::move(name));
    }
  }
  return names;
}

std::vector<std::string> GrafanaVariableNames(absl::string_view expr) {
  std::vector<std::string> names;
  auto add = [&names](std::string name) {
    if (!name.empty() &&
        std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(std::move(name));
    }
  };
  for (size_t i = 0; i < expr.size();) {
    if (expr[i] == '$') {
      std::string name;
      const size_t end = SkipVariable(expr, i, &name);
      if (end == absl::string_view::npos) break;
      add(std::move(name));
      i = end;
    } else if (absl::StartsWith(expr.substr(i), "[[")) {
      const size_t end = expr.find("]]", i);
      if (end == absl::string_view::npos) break;
      absl::string_view inside = expr.substr(i + 2, end - i - 2);
      add(std::string(inside.substr(0, inside.find(':'))));
      i = end + 2;
    } else {
      ++i;
    }
  }
  return names;
}

absl::StatusOr<std::string> ExpandGrafanaVariables(
    absl::string_view expr, const std::map<std::string, std::string>& values) {
  std::string out;
  for (size_t i = 0; i < expr.size();) {
    size_t end = absl::string_view::npos;
    std::string name;
    if (expr[i] == '$') {
      end = SkipVariable(expr, i, &name);
    } else if (absl::StartsWith(expr.substr(i), "[[")) {
      const size_t close = expr.find("]]", i);
      if (close != absl::string_view::npos) {
        absl::string_view inside = expr.substr(i + 2, close - i - 2);
        name = std::string(inside.substr(0, inside.find(':')));
        end = close + 2;
      }
    }
    if (end == absl::string_view::npos || name.empty()) {
      out += expr[i++];
      continue;
    }
    auto value = values.find(name);
    if (value == values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", expr, "\" uses the variable $", name,
                       ", which has no value; define it in the dashboard's "
                       "templating.list"));
    }
    out += value->second;
    i = end;
  }
  return out;
}

namespace {

absl::Status AddPanelQueries(const JsonValue& panels,
                             std::vector<DashboardQuery>* queries) {
  if (panels.kind() != JsonValue::Kind::kArray) {
    return absl::InvalidArgumentError("\"panels\" is not a list");
  }
  for (const JsonValue& panel : panels.array()) {
    const JsonValue* title = panel.Find("title");
    const JsonValue* id = panel.Find("id");
    const std::string name = absl::StrCat(
        "panel \"",
        title != nullptr && title->kind() == JsonValue::Kind::kString
            ? title->string_value()
            : "(untitled)",
        "\"",
        id != nullptr && id->kind() == JsonValue::Kind::kNumber
            ? absl::StrCat(" (id ", id->number_value(), ")")
            : "");
    if (const JsonValue* targets = panel.Find("targets")) {
      if (targets->kind() != JsonValue::Kind::kArray) {
        return absl::InvalidArgumentError(name + ": \"targets\" is not a list");
      }
      for (const JsonValue& target : targets->array()) {
        const JsonValue* expr = target.Find("expr");
        const JsonValue* ref = target.Find("refId");
        const std::string where = absl::StrCat(
            name, ", target ",
            ref != nullptr && ref->kind() == JsonValue::Kind::kString
                ? ref->string_value()
                : "?");
        if (expr == nullptr || expr->kind() != JsonValue::Kind::kString) {
          return absl::InvalidArgumentError(where +
                                            ": \"expr\" is not a string");
        }
        queries->push_back({where, expr->string_value()});
      }
    }
    // A collapsed row holds its panels.
    if (const JsonValue* inner = panel.Find("panels")) {
      absl::Status status = AddPanelQueries(*inner, queries);
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

// The PromQL inside a query variable's Grafana function.
absl::StatusOr<std::string> VariableExpr(const std::string& where,
                                         absl::string_view query) {
  query = absl::StripAsciiWhitespace(query);
  if (absl::ConsumePrefix(&query, "query_result(") &&
      absl::ConsumeSuffix(&query, ")")) {
    return std::string(query);
  }
  if (absl::ConsumePrefix(&query, "label_values(") &&
      absl::ConsumeSuffix(&query, ")")) {
    // label_values(<selector>, <label>) or label_values(<label>): the
    // label is the last argument, after the last comma outside quotes
    // and braces.
    size_t split = absl::string_view::npos;
    int depth = 0;
    for (size_t i = 0; i < query.size(); ++i) {
      const char c = query[i];
      if (c == '"' || c == '\'') {
        const size_t end = SkipString(query, i);
        if (end == absl::string_view::npos) break;
        i = end - 1;
      } else if (c == '{' || c == '(') {
        ++depth;
      } else if (c == '}' || c == ')') {
        --depth;
      } else if (c == ',' && depth == 0) {
        split = i;
      }
    }
    return split == absl::string_view::npos
               ? std::string()
               : std::string(query.substr(0, split));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": \"", query,
                   "\" is not label_values(...) or query_result(...)"));
}

}  // namespace

absl::StatusOr<std::vector<DashboardQuery>> DashboardQueries(
    const JsonValue& dashboard) {
  const JsonValue* panels = dashboard.Find("panels");
  if (panels == nullptr) {
    return absl::InvalidArgumentError(
        "not a Grafana dashboard: it has no \"panels\" list");
  }
  std::vector<DashboardQuery> queries;
  absl::Status status = AddPanelQueries(*panels, &queries);
  if (!status.ok()) return status;
  const JsonValue* templating = dashboard.Find("templating");
  const JsonValue* list =
      templating == nullptr ? nullptr : templating->Find("list");
  if (list == nullptr || list->kind() != JsonValue::Kind::kArray) {
    return queries;
  }
  for (const JsonValue& variable : list->array()) {
    const JsonValue* type = variable.Find("type");
    if (type == nullptr || type->kind() != JsonValue::Kind::kString ||
        type->string_value() != "query") {
      continue;
    }
    const JsonValue* name = variable.Find("name");
    const std::string where =
        absl::StrCat("variable \"",
                     name != nullptr && name->kind() == JsonValue::Kind::kString
                         ? name->string_value()
                         : "?",
                     "\"");
    // Grafana 9 and later store {"query": "...", "refId": ...}; earlier
    // versions a plain string.
    const JsonValue* query = variable.Find("query");
    if (query != nullptr && query->kind() == JsonValue::Kind::kObject) {
      query = query->Find("query");
    }
    if (query == nullptr || query->kind() != JsonValue::Kind::kString) {
      return absl::InvalidArgumentError(where + ": \"query\" is not a string");
    }
    absl::StatusOr<std::string> expr =
        VariableExpr(where, query->string_value());
    if (!expr.ok()) return expr.status();
    queries.push_back({where, *std::move(expr)});
  }
  return queries;
}

std::vector<std::string> DashboardVariableNames(const JsonValue& dashboard) {
  std::vector<std::string> names;
  const JsonValue* templating = dashboard.Find("templating");
  const JsonValue* list =
      templating == nullptr ? nullptr : templating->Find("list");
  if (list == nullptr || list->kind() != JsonValue::Kind::kArray) return names;
  for (const JsonValue& variable : list->array()) {
    const JsonValue* name = variable.Find("name");
    if (name != nullptr && name->kind() == JsonValue::Kind::kString) {
      names.push_back(name->string_value());
    }
  }
  return names;
}

std::set<std::string> ExposedMetricNames(absl::string_view exposition) {
  std::set<std::string> names;
  while (!exposition.empty()) {
    const size_t end = exposition.find('\n');
    absl::string_view line = exposition.substr(0, end);
    exposition = end == absl::string_view::npos ? absl::string_view()
                                                : exposition.substr(end + 1);
    line = absl::StripLeadingAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    size_t n = 0;
    while (n < line.size() && IsIdentifierChar(line[n])) ++n;
    if (n > 0) names.emplace(line.substr(0, n));
  }
  return names;
}

std::vector<std::string> UnexportedMetrics(
    const std::vector<DashboardQuery>& queries,
    const std::set<std::string>& exported,
    const std::set<std::string>& also_known) {
  std::vector<std::string> problems;
  for (const DashboardQuery& query : queries) {
    absl::StatusOr<std::vector<std::string>> names =
        PromqlMetricNames(query.expr);
    if (!names.ok()) {
      problems.push_back(
          absl::StrCat(query.where, ": ", names.status().message()));
      continue;
    }
    if (names->empty()) {
      problems.push_back(absl::StrCat(
          query.where, ": names no metric (query: ", query.expr, ")"));
    }
    for (const std::string& name : *names) {
      if (!exported.count(name) && !also_known.count(name)) {
        problems.push_back(absl::StrCat(query.where, ": ", name,
                                        " is not exported (query: ", query.expr,
                                        ")"));
      }
    }
  }
  return problems;
}

}  // namespace psflow::testing
