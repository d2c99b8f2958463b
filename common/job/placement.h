// Where each variable lives: placement of variables over the parameter
// servers, balanced by bytes.
//
// Variables at or above `split_threshold_bytes` are split by rows over all
// parameter servers (part i on ps i), so one huge embedding or dense layer
// never lands on a single server. The rest go, largest first, to the
// server with the fewest bytes so far (ties: lowest index). Row-major
// layout makes every part a contiguous range of its variable, so clients
// scatter and gather without copying.
//
// The chief computes the placement once and publishes it in the job spec;
// every client uses the same result. Deterministic for the same input.
#ifndef PSFLOW_COMMON_JOB_PLACEMENT_H_
#define PSFLOW_COMMON_JOB_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/logical_variable.h"

namespace psflow {

// One contiguous range of rows of a variable, stored on one server.
struct VariablePart {
  int ps = 0;
  std::string name;            // the name on that server
  std::vector<int64_t> shape;  // rows [row_begin, row_end) x the rest
  int64_t row_begin = 0;
  int64_t row_end = 0;
  int64_t element_offset = 0;  // of the part in the logical variable
  int64_t num_elements = 0;
  // The logical variable's, so that each server updates its part alike.
  VariableUpdate update = VariableUpdate::kOptimizer;
  float momentum = 0;
};

struct PlacedVariable {
  std::string name;
  std::vector<int64_t> shape;
  int64_t num_elements = 0;
  VariableUpdate update = VariableUpdate::kOptimizer;
  float momentum = 0;               // kMovingAverage only
  std::vector<VariablePart> parts;  // by row
};

// A sparse embedding table: every server holds the rows whose ids hash to
// it (common/job/row_placement.h), so it has no parts.
struct PlacedTable {
  std::string name;
  int dim = 0;
};

struct Placement {
  std::vector<PlacedVariable> variables;  // in the input's order
  std::vector<PlacedTable> tables;        // on every server
  std::vector<int64_t> bytes_per_ps;

  // The variable named `name`, or nullptr.
  const PlacedVariable* Find(const std::string& name) const;
};

// Every part carries its variable's update rule and momentum (checked by
// the servers, not here). InvalidArgument for duplicate or empty names,
// non-positive dimensions, num_ps < 1.
absl::StatusOr<Placement> PlaceVariables(
    const std::vector<LogicalVariable>& variables, int num_ps,
    int64_t split_threshold_bytes);

}  // namespace psflow

#endif  // PSFLOW_COMMON_JOB_PLACEMENT_H_
