// Placement <-> the JobSpec's wire form, so every role uses the placement
// the chief computed.
#ifndef PSFLOW_COMMON_JOB_PLACEMENT_PROTO_H_
#define PSFLOW_COMMON_JOB_PLACEMENT_PROTO_H_

#include "absl/status/statusor.h"
#include "common/job/placement.h"
#include "proto/coordinator.pb.h"

namespace psflow {

void PlacementToProto(const Placement& placement, JobSpec& spec);

// Every part takes its variable's update rule and momentum.
// InvalidArgument when a part names a server outside [0, num_ps), the
// parts do not tile their variable, or the update rule is unknown.
// The placement's tables are the spec's `tables` (PlacementToProto leaves
// them to whoever fills JobSpec.tables).
absl::StatusOr<Placement> PlacementFromProto(const JobSpec& spec, int num_ps);

}  // namespace psflow

#endif  // PSFLOW_COMMON_JOB_PLACEMENT_PROTO_H_
