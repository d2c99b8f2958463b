// Between the servers' view and the checkpoint's: each parameter server
// saves the variable parts it holds (SaveShard), the index records logical
// tensors; a restore maps the logical tensors back onto the parts of the
// placement in use, which may have a different number of servers.
#ifndef PSFLOW_CHECKPOINT_SHARD_MAPPING_H_
#define PSFLOW_CHECKPOINT_SHARD_MAPPING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/placement.h"
#include "proto/checkpoint.pb.h"
#include "proto/ps.pb.h"

namespace psflow {

// The index's files and tensors from each server's SaveShard response
// (`saved[i]` from server i, written to `file_names[i]`). Sets files,
// tensors, num_ps, min/max_version; the caller sets the rest.
absl::StatusOr<CheckpointIndex> IndexFromSavedShards(
    const Placement& placement, const std::vector<SaveShardResponse>& saved,
    const std::vector<std::string>& file_names);

// One RestoreShard request per server of `placement`, reading from the
// checkpoint at `checkpoint_dir` (absolute). Every placed variable must be
// in the checkpoint with the same shape, and the checkpoint must hold no
// variable the placement lacks (FailedPrecondition naming them). Slots are
// restored when `restore_slots` (the same optimizer); else they restart.
// The update rule is not in the checkpoint: the placement's decides, and a
// moving-average variable gets its values only, whatever slots were saved.
absl::StatusOr<std::vector<RestoreShardRequest>> PlanRestore(
    const CheckpointIndex& index, const std::string& checkpoint_dir,
    const Placement& placement, bool restore_slots);

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_SHARD_MAPPING_H_
