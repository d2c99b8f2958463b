// The chief's side of checkpoints: saves the parameter servers' variables
// into a new ckpt-<step> directory, keeps the state file and the retention
// policy, and restores a checkpoint onto the servers of any placement.
//
// Saving (docs/checkpoint-format.md has the layout):
//  1. sync mode: hold every server's updates at one step boundary S (Hold
//     FREEZE, then HOLD_AT the highest step seen); async: no pause;
//  2. each server writes its data file into ckpt.tmp-<random>/ and fsyncs;
//  3. release the hold; write the index, fsync; rename the directory to
//     ckpt-<step>, fsync the parent;
//  4. replace the state file atomically, then delete checkpoints the
//     retention policy drops.
// A crash anywhere leaves at worst a ckpt.tmp-* directory, which is never
// read and is removed by the next chief on the directory.
#ifndef PSFLOW_CHECKPOINT_CHECKPOINT_MANAGER_H_
#define PSFLOW_CHECKPOINT_CHECKPOINT_MANAGER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpoint/shard_set.h"
#include "checkpoint/state_file.h"
#include "proto/checkpoint.pb.h"
#include "proto/optimizer.pb.h"
#include "proto/ps.pb.h"

namespace psflow {

struct CheckpointManagerOptions {
  // Absolute; the same path on the chief and every parameter server.
  std::string directory;
  RetentionPolicy retention;
  // Recorded in the index.
  std::string job_name;
  OptimizerConfig optimizer;
  // The model, recorded so exports can give its architecture (empty: none
  // recorded).
  CheckpointModel model;
  UpdateMode mode = ASYNC;
  // Bounds each save (incl. the sync wait for a step boundary) and restore.
  absl::Duration timeout = absl::Minutes(10);
  // SYNC saves hold updates at a step boundary; a server lifts the hold by
  // itself once this chief has not called it for this long (a save in
  // progress counts as calling), so a chief that dies mid-save never
  // freezes training.
  absl::Duration hold_lease = absl::Seconds(60);
};

struct SavedCheckpoint {
  std::string path;
  int64_t step = 0;
  int64_t bytes = 0;
  absl::Duration elapsed;
};

class CheckpointManager {
 public:
  // Creates the directory if needed and removes temporary directories
  // that a crashed save left behind. `client` must outlive the manager.
  static absl::StatusOr<std::unique_ptr<CheckpointManager>> Create(
      const CheckpointManagerOptions& options, ShardSet* client);

  // Saves the variables as they are now (sync: at the next step boundary).
  absl::StatusOr<SavedCheckpoint> Save();

  const std::string& directory() const { return options_.directory; }

 private:
  CheckpointManager(const CheckpointManagerOptions& options, ShardSet* client)
      : options_(options), client_(client) {}

  // Steps 2-3 for an already created temporary directory.
  absl::StatusOr<SavedCheckpoint> SaveInto(const std::string& temp);

  const CheckpointManagerOptions options_;
  ShardSet* const client_;
};

// Restores the checkpoint at `path` (a ckpt-<step> directory) onto the
// servers of `client`'s placement; returns its global step. Optimizer
// slots are restored when `optimizer` is the one the checkpoint was
// written with, else they restart (logged). DataLoss for a damaged
// checkpoint, FailedPrecondition for one of another model; either way no
// server changes a value. A failure after every server checked its part
// (a server lost, or its files changed, during the commit) may leave
// servers partly restored: such an error says so (IsPartlyRestored).
absl::StatusOr<int64_t> RestoreCheckpoint(const std::string& path,
                                          const OptimizerConfig& optimizer,
                                          ShardSet& client,
                                          absl::Duration timeout);

// Whether a RestoreCheckpoint error came after some servers may have
// taken their part: the model is then neither the old one nor the
// checkpoint's, and training must not go on from it.
bool IsPartlyRestored(const absl::Status& status);
// `commit_failure` (not OK), marked so and said so.
absl::Status PartlyRestoredError(const absl::Status& commit_failure);

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_CHECKPOINT_MANAGER_H_
