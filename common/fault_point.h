// Named places in a process where a fault-injection test can make it pause,
// so that a kill or a stop lands inside a phase that is otherwise too short
// to hit (the final checkpoint of a small model takes milliseconds).
// FoundationDB's "buggify" and TiKV's fail points are the same idea.
//
// Configured only from the environment, read once:
//
//   PSFLOW_FAULT_POINTS="chief.final_save=2s,ps.save_shard=1500ms@2"
//
// A point pauses on one hit only: the first, or the one after `@` (the
// second save a server makes above). When it does, it logs
//
//   fault point chief.final_save: pausing 2s
//
// (the harness waits for that line, then injects its fault) and sleeps;
// every other pass through it runs at full speed. Unset, as in every
// production run, a fault point costs one check of an empty map. A
// malformed setting is logged once and ignored: it must never stop a real
// job.
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

// Pauses here if PSFLOW_FAULT_POINTS names `name` and this is its hit.
void FaultPoint(absl::string_view name);

struct FaultPause {
  absl::Duration pause;
  int hit = 1;  // which pass through the point pauses, from 1
  bool operator==(const FaultPause& o) const {
    return pause == o.pause && hit == o.hit;
  }
};

// The parsed form of a PSFLOW_FAULT_POINTS value. InvalidArgument naming
// the bad entry.
absl::StatusOr<std::map<std::string, FaultPause>> ParseFaultPoints(
    absl::string_view spec);

}  // namespace psflow

#endif  // PSFLOW_COMMON_FAULT_POINT_H_
