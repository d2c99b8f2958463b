// The `checkpoint` state file of a checkpoint directory: which checkpoint
// is newest and which are kept, in protobuf text format with TensorFlow's
// field names, e.g.
//
//   model_checkpoint_path: "ckpt-1200"
//   all_model_checkpoint_paths: "ckpt-600"
//   all_model_checkpoint_paths: "ckpt-1200"
//   all_model_checkpoint_timestamps: 1763800000.5
//   all_model_checkpoint_timestamps: 1763800600.5
//   last_preserved_timestamp: 1763799000
//
// It is replaced atomically after a checkpoint is complete, so it never
// names one that is not.
#ifndef PSFLOW_CHECKPOINT_STATE_FILE_H_
#define PSFLOW_CHECKPOINT_STATE_FILE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"

namespace psflow {

// NotFound when `dir` has no state file; DataLoss, naming it and how to
// recover, when it is empty, truncated, unparsable or inconsistent.
absl::StatusOr<CheckpointState> ReadCheckpointState(const std::string& dir);

// The state file's text (as ReadCheckpointState checks it); `path` and
// `dir` name it in errors.
absl::StatusOr<CheckpointState> ParseCheckpointState(const std::string& text,
                                                     const std::string& path,
                                                     const std::string& dir);

// Replaces the state file atomically (temporary file, fsync, rename).
absl::Status WriteCheckpointState(const std::string& dir,
                                  const CheckpointState& state);

struct RetentionPolicy {
  // Checkpoints kept in the list; the oldest go first. < 1 keeps all.
  int max_to_keep = 5;
  // Of those leaving the list, one every this many hours is preserved
  // (left on disk, no longer listed). 0: none.
  double keep_checkpoint_every_n_hours = 0;
};

// Records `name`, written at `timestamp` (seconds since the epoch), as the
// newest checkpoint of `state` and applies `policy`. Returns the names of
// checkpoints to delete (after the new state is written).
std::vector<std::string> AddCheckpoint(CheckpointState& state,
                                       const std::string& name,
                                       double timestamp,
                                       const RetentionPolicy& policy);

// The newest complete checkpoint's directory, or nullopt when `dir` has
// none. FailedPrecondition when the state file names a directory that is
// gone; DataLoss for a damaged state file.
absl::StatusOr<std::optional<std::string>> LatestCheckpoint(
    const std::string& dir);

// The kept checkpoints' names ("ckpt-1200", in `dir`), newest first (the
// state file's list; the first is LatestCheckpoint's). Empty when `dir`
// has no state file; DataLoss for a damaged one. A listed directory may
// be gone: the caller checks.
absl::StatusOr<std::vector<std::string>> KeptCheckpointsNewestFirst(
    const std::string& dir);

// Takes the kept checkpoints `names` (damaged ones) out of `dir`'s state
// file, then renames each directory that exists to "<name>.damaged" (or
// "<name>.damaged-2", ...), left for inspection: a later save of the same
// step then writes a new checkpoint instead of keeping the damaged one.
// At least one kept checkpoint must remain listed. Returns the names the
// directories now have.
absl::StatusOr<std::vector<std::string>> SetAsideCheckpoints(
    const std::string& dir, const std::vector<std::string>& names);

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_STATE_FILE_H_
