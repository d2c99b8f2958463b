// What checkpointing needs from the parameter servers: their number, the
// placement of the job's variables over them, and the checkpoint fan-outs
// (Hold, SaveShard, RestoreShard). ParameterClient (client/ps_client.h)
// implements it; checkpoint/ never depends on a transport.
//
// Implementations are thread-safe.
#ifndef PSFLOW_CHECKPOINT_SHARD_SET_H_
#define PSFLOW_CHECKPOINT_SHARD_SET_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/job/placement.h"
#include "proto/ps.pb.h"

namespace psflow {

class ShardSet {
 public:
  virtual ~ShardSet() = default;

  virtual int num_shards() const = 0;
  virtual const Placement& placement() const = 0;

  // One request per server (requests[i] to server i), sent to all at once;
  // the responses in server order, or the first error (naming the server).
  virtual absl::StatusOr<std::vector<HoldResponse>> HoldAll(
      const HoldRequest& request) = 0;
  virtual absl::StatusOr<std::vector<SaveShardResponse>> SaveShards(
      const std::vector<SaveShardRequest>& requests,
      absl::Duration timeout) = 0;
  virtual absl::StatusOr<std::vector<RestoreShardResponse>> RestoreShards(
      const std::vector<RestoreShardRequest>& requests,
      absl::Duration timeout) = 0;
};

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_SHARD_SET_H_
