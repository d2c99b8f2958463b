// Saving and restoring one parameter server's variables: the server's half
// of a checkpoint (the chief's half, which names the files and writes the
// index, is in checkpoint/). Format: docs/checkpoint-format.md.
//
// Both run on a thread of their own (they wait on disks and, in sync mode,
// on workers) while training continues on the server's other threads.
#ifndef PSFLOW_PS_SHARD_CHECKPOINT_H_
#define PSFLOW_PS_SHARD_CHECKPOINT_H_

#include <functional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/confined_path.h"
#include "proto/ps.pb.h"
#include "ps/ps_core.h"

namespace psflow {

// Writes every variable's values and slots, chunk by chunk, to a new file
// and fsyncs it. In sync mode with request.sync_step set, waits (until
// `deadline`) for every chunk to reach exactly that step first; the caller
// holds updates there (ParameterServerCore::Hold). The file is removed on
// any error.
// `cancelled` is polled while waiting (Cancelled when it returns true).
//
// With `confinement` (the server's --checkpoint_root), every path a request
// names must lie under its root (PermissionDenied otherwise, before any
// file is touched); without it any absolute path is used.
absl::StatusOr<SaveShardResponse> SaveShard(
    ParameterServerCore& core, const SaveShardRequest& request,
    absl::Time deadline, std::function<bool()> cancelled = nullptr,
    const PathConfinement* confinement = nullptr);

// Reads and checks every source, then overwrites the variables and sets
// their versions (or, by request.phase(), only prepares, commits or aborts:
// see RestoreShardRequest). Nothing changes unless every source is intact:
// DataLoss names the damaged file, tensor and offset.
absl::StatusOr<RestoreShardResponse> RestoreShard(
    ParameterServerCore& core, const RestoreShardRequest& request,
    const PathConfinement* confinement = nullptr);

}  // namespace psflow

#endif  // PSFLOW_PS_SHARD_CHECKPOINT_H_
