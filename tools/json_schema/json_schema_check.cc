#include "tools/json_schema/json_schema_check.h"

#include <cmath>
#include <regex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace psflow {
namespace {

using Kind = JsonValue::Kind;

// Keywords that only annotate.
const std::set<std::string>& Annotations() {
  static const auto* const kAnnotations = new std::set<std::string>{
      "$schema",         "$id",         "$comment", "$defs",
      "title",           "description", "format",   "deprecated",
      "contentEncoding", "default",     "examples"};
  return *kAnnotations;
}

bool HasType(const JsonValue& value, const std::string& type) {
  switch (value.kind()) {
    case Kind::kNull:
      return type == "null";
    case Kind::kBool:
      return type == "boolean";
    case Kind::kNumber:
      return type == "number" ||
             (type == "integer" &&
              std::trunc(value.number_value()) == value.number_value());
    case Kind::kString:
      return type == "string";
    case Kind::kArray:
      return type == "array";
    case Kind::kObject:
      return type == "object";
  }
  return false;
}

bool Equal(const JsonValue& a, const JsonValue& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kNull:
      return true;
    case Kind::kBool:
      return a.bool_value() == b.bool_value();
    case Kind::kNumber:
      return a.number_value() == b.number_value();
    case Kind::kString:
      return a.string_value() == b.string_value();
    default:
      return false;  // no schema here lists arrays or objects
  }
}

class Checker {
 public:
  explicit Checker(const JsonValue& root) : root_(root) {}

  void Check(const JsonValue& value, const JsonValue& schema,
             const std::string& path) {
    if (schema.kind() == Kind::kBool) {
      if (!schema.bool_value()) Problem(path, "is not allowed here");
      return;
    }
    if (schema.kind() != Kind::kObject) {
      Problem(path, "the schema here is neither an object nor a boolean");
      return;
    }
    const JsonValue* properties = schema.Find("properties");
    for (const auto& [keyword, argument] : schema.object()) {
      if (Annotations().count(keyword) > 0) continue;
      if (keyword == "$ref") {
        CheckRef(value, argument, path);
      } else if (keyword == "type") {
        CheckType(value, argument, path);
      } else if (keyword == "enum") {
        CheckEnum(value, argument, path);
      } else if (keyword == "pattern") {
        if (value.kind() == Kind::kString &&
            !std::regex_search(value.string_value(),
                               std::regex(argument.string_value()))) {
          Problem(path, absl::StrCat("is ", value.Describe(),
                                     ", which does not match ",
                                     argument.string_value()));
        }
      } else if (keyword == "minimum" || keyword == "maximum") {
        if (value.kind() != Kind::kNumber) continue;
        const bool low = keyword == "minimum";
        if (low ? value.number_value() < argument.number_value()
                : value.number_value() > argument.number_value()) {
          Problem(path, absl::StrCat(
                            "is ", value.Describe(), ", ",
                            low ? "below the minimum " : "above the maximum ",
                            argument.number_value()));
        }
      } else if (keyword == "properties") {
        if (value.kind() != Kind::kObject) continue;
        for (const auto& [name, member] : value.object()) {
          if (const JsonValue* sub = argument.Find(name); sub != nullptr) {
            Check(member, *sub, Child(path, name));
          }
        }
      } else if (keyword == "additionalProperties") {
        if (value.kind() != Kind::kObject) continue;
        for (const auto& [name, member] : value.object()) {
          if (properties != nullptr && properties->Find(name) != nullptr) {
            continue;
          }
          if (argument.kind() == Kind::kBool && !argument.bool_value()) {
            Problem(path, absl::StrCat("has no field \"", name, "\"",
                                       KnownFields(properties)));
          } else {
            Check(member, argument, Child(path, name));
          }
        }
      } else if (keyword == "propertyNames") {
        if (value.kind() != Kind::kObject) continue;
        for (const auto& member : value.object()) {
          Check(JsonValue(member.first), argument,
                absl::StrCat(path, " key \"", member.first, "\""));
        }
      } else if (keyword == "items") {
        if (value.kind() != Kind::kArray) continue;
        for (size_t i = 0; i < value.array().size(); ++i) {
          Check(value.array()[i], argument, absl::StrCat(path, "[", i, "]"));
        }
      } else if (keyword == "required") {
        if (value.kind() != Kind::kObject) continue;
        for (const JsonValue& name : argument.array()) {
          if (value.Find(name.string_value()) == nullptr) {
            Problem(path, absl::StrCat("lacks the required field \"",
                                       name.string_value(), "\""));
          }
        }
      } else {
        Problem(path, absl::StrCat("the schema's keyword \"", keyword,
                                   "\" is not supported by this checker"));
      }
    }
  }

  std::vector<std::string> problems;

 private:
  static std::string Child(const std::string& path, const std::string& name) {
    return absl::StrCat(path, ".", name);
  }

  static std::string KnownFields(const JsonValue* properties) {
    if (properties == nullptr || properties->object().empty()) {
      return " (it takes none)";
    }
    std::vector<std::string> names;
    for (const auto& member : properties->object()) {
      names.push_back(member.first);
    }
    return absl::StrCat(" (it takes ", absl::StrJoin(names, ", "), ")");
  }

  void Problem(const std::string& path, const std::string& what) {
    problems.push_back(absl::StrCat(path, ": ", what));
  }

  void CheckRef(const JsonValue& value, const JsonValue& ref,
                const std::string& path) {
    // Only references into this schema: "#" and "#/a/b" JSON pointers.
    const std::string& target = ref.string_value();
    if (target != "#" && !absl::StartsWith(target, "#/")) {
      Problem(path, absl::StrCat("the schema's $ref \"", target,
                                 "\" leaves the schema"));
      return;
    }
    const JsonValue* schema = &root_;
    if (target != "#") {
      for (absl::string_view token :
           absl::StrSplit(absl::string_view(target).substr(2), '/')) {
        const std::string name =
            absl::StrReplaceAll(token, {{"~1", "/"}, {"~0", "~"}});
        schema = schema->Find(name);
        if (schema == nullptr) {
          Problem(path, absl::StrCat("the schema's $ref \"", target,
                                     "\" is dangling"));
          return;
        }
      }
    }
    Check(value, *schema, path);
  }

  void CheckType(const JsonValue& value, const JsonValue& type,
                 const std::string& path) {
    std::vector<std::string> types;
    if (type.kind() == Kind::kString) {
      types.push_back(type.string_value());
    } else {
      for (const JsonValue& t : type.array()) types.push_back(t.string_value());
    }
    for (const std::string& t : types) {
      if (HasType(value, t)) return;
    }
    Problem(path, absl::StrCat("is ", value.Describe(), "; expected ",
                               absl::StrJoin(types, " or ")));
  }

  void CheckEnum(const JsonValue& value, const JsonValue& values,
                 const std::string& path) {
    std::vector<std::string> allowed;
    for (const JsonValue& v : values.array()) {
      if (Equal(value, v)) return;
      allowed.push_back(JsonQuote(v.kind() == Kind::kString ? v.string_value()
                                                            : v.Describe()));
    }
    Problem(path, absl::StrCat("is ", value.Describe(), "; expected one of ",
                               absl::StrJoin(allowed, ", ")));
  }

  const JsonValue& root_;
};

}  // namespace

std::vector<std::string> CheckAgainstSchema(const JsonValue& document,
                                            const JsonValue& schema) {
  Checker checker(schema);
  checker.Check(document, schema, "$");
  return std::move(checker.problems);
}

}  // namespace psflow
