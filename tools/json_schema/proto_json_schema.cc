#include "tools/json_schema/proto_json_schema.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::SourceLocation;
using Object = JsonValue::Object;
using Array = JsonValue::Array;

constexpr char kDraft[] = "https://json-schema.org/draft/2020-12/schema";

JsonValue String(std::string s) { return JsonValue(std::move(s)); }
JsonValue Number(double d) { return JsonValue(d); }
JsonValue Type(const char* type) {
  return JsonValue(Object{{"type", String(type)}});
}

// Comment text as one description: the lines of a paragraph joined by
// spaces, paragraphs by a blank line.
std::string CommentText(const std::string& comment) {
  std::vector<std::string> paragraphs;
  std::string paragraph;
  for (absl::string_view line : absl::StrSplit(comment, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) {
      if (!paragraph.empty()) paragraphs.push_back(std::move(paragraph));
      paragraph.clear();
      continue;
    }
    if (!paragraph.empty()) paragraph += ' ';
    absl::StrAppend(&paragraph, line);
  }
  if (!paragraph.empty()) paragraphs.push_back(std::move(paragraph));
  return absl::StrJoin(paragraphs, "\n\n");
}

// The leading and trailing comments of a declaration; empty without
// source info.
template <typename D>
std::string Description(const D& descriptor) {
  SourceLocation location;
  if (!descriptor.GetSourceLocation(&location)) return "";
  std::vector<std::string> parts;
  for (const std::string* comment :
       {&location.leading_comments, &location.trailing_comments}) {
    std::string text = CommentText(*comment);
    if (!text.empty()) parts.push_back(std::move(text));
  }
  return absl::StrJoin(parts, " ");
}

// `schema` (an object) with "description" first, when there is one.
JsonValue Described(std::string description, JsonValue schema) {
  if (description.empty()) return schema;
  Object object{{"description", String(std::move(description))}};
  for (const auto& member : schema.object()) object.push_back(member);
  return JsonValue(std::move(object));
}

// protoc's default JSON name: lowerCamelCase ("batch_size": "batchSize").
std::string DefaultJsonName(const std::string& name) {
  std::string json;
  bool upper = false;
  for (char c : name) {
    if (c == '_') {
      upper = true;
    } else {
      json.push_back(upper ? absl::ascii_toupper(c) : c);
      upper = false;
    }
  }
  return json;
}

// The name the field is documented under, and the other the parser
// accepts (empty when both are the same). A declared json_name is the
// documented one. (protoc writes a json_name for every field into a
// descriptor set, so a declared one is told from the default by value.)
std::pair<std::string, std::string> FieldNames(const FieldDescriptor& field) {
  std::string primary = field.name();
  std::string alias = field.json_name();
  if (alias != DefaultJsonName(primary)) std::swap(primary, alias);
  if (alias == primary) alias.clear();
  return {primary, alias};
}

JsonValue Integer(bool is_signed, int bits) {
  if (bits == 32) {
    return JsonValue(
        Object{{"type", String("integer")},
               {"minimum", Number(is_signed ? -2147483648.0 : 0)},
               {"maximum", Number(is_signed ? 2147483647.0 : 4294967295.0)}});
  }
  // Beyond 2^53 a JSON number loses digits: protobuf writes 64-bit
  // integers as strings and reads both forms.
  Object object{
      {"type", JsonValue(Array{String("integer"), String("string")})}};
  if (!is_signed) object.push_back({"minimum", Number(0)});
  object.push_back({"pattern", String(is_signed ? "^-?[0-9]+$" : "^[0-9]+$")});
  return JsonValue(std::move(object));
}

JsonValue EnumSchema(const EnumDescriptor& type) {
  if (type.full_name() == "google.protobuf.NullValue") return Type("null");
  Array names;
  for (int i = 0; i < type.value_count(); ++i) {
    names.push_back(String(type.value(i)->name()));
  }
  return JsonValue(Object{{"type", String("string")},
                          {"enum", JsonValue(std::move(names))}});
}

class SchemaBuilder {
 public:
  explicit SchemaBuilder(const Descriptor& root) : root_(root) {}

  // The root's schema, with every message type it reaches in $defs.
  absl::StatusOr<JsonValue> Build(const ProtoJsonSchemaOptions& options) {
    ASSIGN_OR_RETURN(Object root, MessageSchema(root_));
    std::map<std::string, JsonValue> defs;
    while (!pending_.empty()) {
      const Descriptor* next = pending_.begin()->second;
      pending_.erase(pending_.begin());
      ASSIGN_OR_RETURN(Object def, MessageSchema(*next));
      defs.emplace(next->full_name(), JsonValue(std::move(def)));
    }
    Object schema{{"$schema", String(kDraft)}};
    if (!options.title.empty()) {
      schema.push_back({"title", String(options.title)});
    }
    // The root's own description (its comment and oneofs), then the note.
    std::string description;
    for (const auto& [key, value] : root) {
      if (key == "description") description = value.string_value();
    }
    if (!options.note.empty()) {
      if (!description.empty()) description += "\n\n";
      description += options.note;
    }
    if (!description.empty()) {
      schema.push_back({"description", String(std::move(description))});
    }
    for (auto& member : root) {
      if (member.first != "description") schema.push_back(std::move(member));
    }
    if (!defs.empty()) {
      Object members;
      for (auto& [name, def] : defs) members.push_back({name, std::move(def)});
      schema.push_back({"$defs", JsonValue(std::move(members))});
    }
    return JsonValue(std::move(schema));
  }

 private:
  absl::StatusOr<Object> MessageSchema(const Descriptor& message) {
    done_.insert(message.full_name());
    std::vector<std::string> description;
    if (std::string own = Description(message); !own.empty()) {
      description.push_back(std::move(own));
    }
    for (int i = 0; i < message.real_oneof_decl_count(); ++i) {
      const google::protobuf::OneofDescriptor& oneof =
          *message.oneof_decl(i);  // synthetic oneofs come last
      std::vector<std::string> members;
      for (int f = 0; f < oneof.field_count(); ++f) {
        members.push_back(
            absl::StrCat("\"", FieldNames(*oneof.field(f)).first, "\""));
      }
      description.push_back(absl::StrCat("Set at most one of ",
                                         absl::StrJoin(members, ", "),
                                         " (oneof ", oneof.name(), ")."));
    }
    Object properties;
    for (int i = 0; i < message.field_count(); ++i) {
      const FieldDescriptor& field = *message.field(i);
      ASSIGN_OR_RETURN(JsonValue schema, FieldSchema(field));
      const auto [primary, alias] = FieldNames(field);
      const std::string text = Description(field);
      properties.push_back({primary, Described(text, schema)});
      if (!alias.empty()) {
        properties.push_back(
            {alias, Described(absl::StrCat("Same as \"", primary, "\".",
                                           text.empty() ? "" : " ", text),
                              schema)});
      }
    }
    Object schema;
    if (!description.empty()) {
      schema.push_back(
          {"description", String(absl::StrJoin(description, "\n\n"))});
    }
    schema.push_back({"type", String("object")});
    schema.push_back({"properties", JsonValue(std::move(properties))});
    schema.push_back({"additionalProperties", JsonValue(false)});
    return schema;
  }

  // A field as a whole: a map, a list, or one value.
  absl::StatusOr<JsonValue> FieldSchema(const FieldDescriptor& field) {
    if (field.is_map()) {
      const FieldDescriptor& key = *field.message_type()->map_key();
      ASSIGN_OR_RETURN(JsonValue value,
                       ValueSchema(*field.message_type()->map_value()));
      Object object{{"type", String("object")}};
      if (key.type() == FieldDescriptor::TYPE_BOOL) {
        object.push_back(
            {"propertyNames",
             JsonValue(Object{{"enum", JsonValue(Array{String("true"),
                                                       String("false")})}})});
      } else if (key.cpp_type() != FieldDescriptor::CPPTYPE_STRING) {
        const bool is_signed =
            key.cpp_type() == FieldDescriptor::CPPTYPE_INT32 ||
            key.cpp_type() == FieldDescriptor::CPPTYPE_INT64;
        object.push_back(
            {"propertyNames",
             JsonValue(Object{
                 {"pattern", String(is_signed ? "^-?[0-9]+$" : "^[0-9]+$")}})});
      }
      object.push_back({"additionalProperties", std::move(value)});
      return JsonValue(std::move(object));
    }
    ASSIGN_OR_RETURN(JsonValue value, ValueSchema(field));
    if (!field.is_repeated()) return value;
    return JsonValue(
        Object{{"type", String("array")}, {"items", std::move(value)}});
  }

  // One value of a field.
  absl::StatusOr<JsonValue> ValueSchema(const FieldDescriptor& field) {
    switch (field.type()) {
      case FieldDescriptor::TYPE_DOUBLE:
      case FieldDescriptor::TYPE_FLOAT:
        return Type("number");
      case FieldDescriptor::TYPE_INT32:
      case FieldDescriptor::TYPE_SINT32:
      case FieldDescriptor::TYPE_SFIXED32:
        return Integer(true, 32);
      case FieldDescriptor::TYPE_UINT32:
      case FieldDescriptor::TYPE_FIXED32:
        return Integer(false, 32);
      case FieldDescriptor::TYPE_INT64:
      case FieldDescriptor::TYPE_SINT64:
      case FieldDescriptor::TYPE_SFIXED64:
        return Integer(true, 64);
      case FieldDescriptor::TYPE_UINT64:
      case FieldDescriptor::TYPE_FIXED64:
        return Integer(false, 64);
      case FieldDescriptor::TYPE_BOOL:
        return Type("boolean");
      case FieldDescriptor::TYPE_STRING:
        return Type("string");
      case FieldDescriptor::TYPE_BYTES:
        return JsonValue(Object{{"type", String("string")},
                                {"contentEncoding", String("base64")}});
      case FieldDescriptor::TYPE_ENUM:
        return EnumSchema(*field.enum_type());
      case FieldDescriptor::TYPE_MESSAGE:
      case FieldDescriptor::TYPE_GROUP:
        return MessageReference(*field.message_type());
    }
    return absl::InternalError(
        absl::StrCat("field ", field.full_name(), " has an unknown type"));
  }

  absl::StatusOr<JsonValue> MessageReference(const Descriptor& message) {
    const std::string& name = message.full_name();
    if (absl::StartsWith(name, "google.protobuf.")) {
      return WellKnownType(message);
    }
    if (&message == &root_) return JsonValue(Object{{"$ref", String("#")}});
    if (done_.count(name) == 0) pending_.emplace(name, &message);
    return JsonValue(Object{{"$ref", String(absl::StrCat("#/$defs/", name))}});
  }

  // The special JSON forms of protobuf's well-known types.
  absl::StatusOr<JsonValue> WellKnownType(const Descriptor& message) {
    const std::string name = message.name();
    if (name == "Duration") {
      return JsonValue(
          Object{{"type", String("string")},
                 {"pattern", String("^-?[0-9]+(\\.[0-9]{1,9})?s$")}});
    }
    if (name == "Timestamp") {
      return JsonValue(
          Object{{"type", String("string")}, {"format", String("date-time")}});
    }
    if (name == "FieldMask") return Type("string");
    if (name == "Struct") return Type("object");
    if (name == "ListValue") return Type("array");
    if (name == "Value") return JsonValue(Object{});  // any JSON value
    if (name == "Empty") {
      return JsonValue(Object{{"type", String("object")},
                              {"additionalProperties", JsonValue(false)}});
    }
    if (name == "Any") {
      return JsonValue(
          Object{{"type", String("object")},
                 {"properties", JsonValue(Object{{"@type", Type("string")}})},
                 {"required", JsonValue(Array{String("@type")})}});
    }
    if (absl::EndsWith(name, "Value") && message.field_count() == 1 &&
        message.field(0)->name() == "value") {
      return ValueSchema(*message.field(0));  // the wrappers
    }
    return absl::UnimplementedError(
        absl::StrCat("no JSON Schema mapping for ", message.full_name(),
                     "; add one to tools/json_schema/proto_json_schema.cc"));
  }

  const Descriptor& root_;
  std::set<std::string> done_;
  // Message types referred to and not yet described, by full name (the
  // $defs come out sorted whatever the fields' order).
  std::map<std::string, const Descriptor*> pending_;
};

std::string FormatNumber(double d) {
  if (std::trunc(d) == d && std::fabs(d) < 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(d));
  }
  return absl::StrFormat("%.17g", d);
}

bool IsScalar(const JsonValue& v) {
  return v.kind() != JsonValue::Kind::kArray &&
         v.kind() != JsonValue::Kind::kObject;
}

void Write(const JsonValue& v, int depth, std::string& out) {
  const std::string indent(2 * (depth + 1), ' ');
  switch (v.kind()) {
    case JsonValue::Kind::kNull:
      out += "null";
      return;
    case JsonValue::Kind::kBool:
      out += v.bool_value() ? "true" : "false";
      return;
    case JsonValue::Kind::kNumber:
      out += FormatNumber(v.number_value());
      return;
    case JsonValue::Kind::kString:
      out += JsonQuote(v.string_value());
      return;
    case JsonValue::Kind::kArray: {
      const Array& array = v.array();
      if (absl::c_all_of(array, IsScalar)) {
        out += '[';
        for (size_t i = 0; i < array.size(); ++i) {
          if (i > 0) out += ", ";
          Write(array[i], depth + 1, out);
        }
        out += ']';
        return;
      }
      out += "[\n";
      for (size_t i = 0; i < array.size(); ++i) {
        out += indent;
        Write(array[i], depth + 1, out);
        out += i + 1 < array.size() ? ",\n" : "\n";
      }
      out += std::string(2 * depth, ' ') + "]";
      return;
    }
    case JsonValue::Kind::kObject: {
      const Object& object = v.object();
      if (object.empty()) {
        out += "{}";
        return;
      }
      out += "{\n";
      for (size_t i = 0; i < object.size(); ++i) {
        absl::StrAppend(&out, indent, JsonQuote(object[i].first), ": ");
        Write(object[i].second, depth + 1, out);
        out += i + 1 < object.size() ? ",\n" : "\n";
      }
      out += std::string(2 * depth, ' ') + "}";
      return;
    }
  }
}

}  // namespace

absl::StatusOr<std::string> ProtoJsonSchema(
    const google::protobuf::Descriptor& root,
    const ProtoJsonSchemaOptions& options) {
  ASSIGN_OR_RETURN(JsonValue schema, SchemaBuilder(root).Build(options));
  std::string out;
  Write(schema, 0, out);
  out += '\n';
  return out;
}

}  // namespace psflow
