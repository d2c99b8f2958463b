// A strict JSON (RFC 8259) reader for configuration documents such as
// TF_CONFIG.
//
// Strict on purpose: TensorFlow reads TF_CONFIG with Python's json module,
// so a document psflow accepts must be one TensorFlow accepts too (no single
// quotes, comments or trailing commas). Errors give line and column.
// Duplicate object keys are rejected: Python would silently keep the last
// one, which hides typos in hand-written cluster specs.
//
// Values are immutable after parsing and safe to share between threads.
#ifndef PSFLOW_COMMON_JSON_H_
#define PSFLOW_COMMON_JSON_H_

#include <cstddef>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<JsonValue>;
  // Members in document order.
  using Object = std::vector<std::pair<std::string, JsonValue>>;

  JsonValue() = default;  // null
  explicit JsonValue(bool value) : value_(value) {}
  explicit JsonValue(double value) : value_(value) {}
  explicit JsonValue(std::string value) : value_(std::move(value)) {}
  explicit JsonValue(Array value) : value_(std::move(value)) {}
  explicit JsonValue(Object value) : value_(std::move(value)) {}

  Kind kind() const { return static_cast<Kind>(value_.index()); }
  bool is_null() const { return kind() == Kind::kNull; }

  // Accessors; each requires the matching kind().
  bool bool_value() const { return std::get<bool>(value_); }
  double number_value() const { return std::get<double>(value_); }
  const std::string& string_value() const {
    return std::get<std::string>(value_);
  }
  const Array& array() const { return std::get<Array>(value_); }
  const Object& object() const { return std::get<Object>(value_); }

  // The member named `key` of an object; nullptr when absent or when this
  // is not an object.
  const JsonValue* Find(absl::string_view key) const;

  // How the value reads in an error message: "the number 3", "the string
  // \"x\"", "a list", "an object", "null", "true".
  std::string Describe() const;

 private:
  std::variant<std::nullptr_t, bool, double, std::string, Array, Object>
      value_ = nullptr;
};

// Parses one JSON document (surrounding whitespace allowed). Returns
// InvalidArgument "line L, column C: <problem>" on malformed input.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view text);

}  // namespace psflow

#endif  // PSFLOW_COMMON_JSON_H_
