// A JSON Schema (draft 2020-12) of a protobuf message's proto3 JSON form,
// as protobuf's JSON parser (and so ParseJobConfig) reads it, generated
// from the message's descriptors. configs/job_config.schema.json is this
// schema of psflow.JobConfig, for editors that complete and check job
// configs as they are typed.
//
// The mapping:
//   - a message is an object with additionalProperties false; each field
//     is a property under its proto name and, when different, its JSON
//     name (the parser accepts both). A field that declares a json_name
//     (LayerConfig's Keras class names, JobConfig's "$schema") is
//     described under that name, and the proto name is noted as its
//     alias; otherwise the lowerCamelCase name is the alias. Every
//     message type but the root is a $defs entry, by full name;
//   - repeated fields are arrays; maps are objects of their values (keys
//     of integer maps are decimal strings);
//   - enums are strings: their values' names;
//   - 32-bit integers are integers within their range; 64-bit integers
//     are integers or decimal strings, as protobuf writes them; floats and
//     doubles are numbers; bytes are base64 strings;
//   - the well-known types take their special JSON forms (Duration,
//     Timestamp, FieldMask as strings, Struct, Value, ListValue, Any, the
//     wrappers as their value).
// Comments become descriptions when the descriptors carry source info (a
// descriptor set written by `protoc --include_source_info`); descriptors
// compiled into a binary carry none. A oneof is noted in its message's
// description, not enforced: the parser refuses a second member.
//
// Stateless; thread-safe.
#ifndef PSFLOW_TOOLS_JSON_SCHEMA_PROTO_JSON_SCHEMA_H_
#define PSFLOW_TOOLS_JSON_SCHEMA_PROTO_JSON_SCHEMA_H_

#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"

namespace psflow {

struct ProtoJsonSchemaOptions {
  std::string title;  // the schema's "title"
  // Appended to the root message's description as a paragraph of its own
  // (e.g. where the schema comes from and how to regenerate it).
  std::string note;
};

// The schema of `root`, as pretty-printed JSON ending in a newline: the
// same text for the same descriptors. Unimplemented naming the type for a
// google.protobuf well-known type it does not map.
absl::StatusOr<std::string> ProtoJsonSchema(
    const google::protobuf::Descriptor& root,
    const ProtoJsonSchemaOptions& options);

}  // namespace psflow

#endif  // PSFLOW_TOOLS_JSON_SCHEMA_PROTO_JSON_SCHEMA_H_
