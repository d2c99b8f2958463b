// Checks a JSON document against a JSON Schema (draft 2020-12), for the
// keywords proto_json_schema.h writes: $ref (within the schema), type,
// properties, additionalProperties, propertyNames, items, required, enum,
// pattern, minimum and maximum; annotations (title, description, format,
// ...) are ignored. Any other keyword is reported as a problem, so a
// schema this checker does not understand fails instead of passing.
//
// It lets tests check the shipped job configs against the checked-in
// schema without a JSON Schema library (Debian's is not among psflow's
// packages). Stateless; thread-safe.
#ifndef PSFLOW_TOOLS_JSON_SCHEMA_JSON_SCHEMA_CHECK_H_
#define PSFLOW_TOOLS_JSON_SCHEMA_JSON_SCHEMA_CHECK_H_

#include <string>
#include <vector>

#include "common/json.h"

namespace psflow {

// Every way `document` breaks `schema`, each as "<where>: <problem>" with
// <where> a path such as `$.model.layers[2].Conv2D`; empty when it
// follows it.
std::vector<std::string> CheckAgainstSchema(const JsonValue& document,
                                            const JsonValue& schema);

}  // namespace psflow

#endif  // PSFLOW_TOOLS_JSON_SCHEMA_JSON_SCHEMA_CHECK_H_
