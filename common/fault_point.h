// Named places in a process where a fault-injection test can make it pause,
// so that a kill or a stop lands inside a phase that is otherwise too short
// to hit (the final checkpoint of a small model takes milliseconds).
// FoundationDB's "buggify" and TiKV's fail points are the same idea.
//
// Configured only from the environment, read once:
//
//   PSFLOW_FAULT_POINTS="chief.final_save=2s,chief.final_evaluation=500ms"
//
// A point that is hit while configured logs
//
//   fault point chief.final_save: pausing 2s
//
// (the harness waits for that line, then injects its fault) and sleeps. Each
// point pauses on its first hit only: a restarted process, or a later pass
// through the same code, runs at full speed. Unset, as in every production
// run, a fault point costs one map lookup in an empty map. A malformed
// setting is logged once and ignored: it must never stop a real job.
//
// The points: docs/testing.md, "Fault injection".
#ifndef PSFLOW_COMMON_FAULT_POINT_H_
#define PSFLOW_COMMON_FAULT_POINT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psflow {

// Pauses here if PSFLOW_FAULT_POINTS names `name` (first hit only).
void FaultPoint(absl::string_view name);

// The parsed form of a PSFLOW_FAULT_POINTS value: name -> pause.
// InvalidArgument naming the bad entry.
absl::StatusOr<std::map<std::string, absl::Duration>> ParseFaultPoints(
    absl::string_view spec);

}  // namespace psflow

#endif  // PSFLOW_COMMON_FAULT_POINT_H_
