// Embedding tables in a parameter server's checkpoint data file: saving a
// server's tables as row segments after its dense slices, and restoring
// them from every server's segments, each server keeping the rows whose
// ids hash to it (so a checkpoint restores onto any number of servers).
// Layout: docs/checkpoint-format.md, "Embedding tables".
#ifndef PSFLOW_PS_TABLE_CHECKPOINT_H_
#define PSFLOW_PS_TABLE_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/file_util.h"
#include "proto/ps.pb.h"
#include "ps/embedding_table.h"

namespace psflow {

// Bytes one saved row takes: id, update count and last use (8 bytes each),
// then the values and every slot.
inline int64_t SavedRowBytes(int dim, int slots) {
  return 24 + int64_t{4} * dim * (1 + slots);
}

// Rows per saved segment, the unit of CRC checking and of a reader's
// buffer: at most 64 Ki rows and 64 MiB (readers refuse larger segments;
// 64 Ki rows of dimension 16 with Adagrad are 10 MiB).
inline constexpr int64_t kMaxSegmentBytes = int64_t{64} << 20;
inline int64_t RowsPerSegment(int dim, int slots) {
  const int64_t by_bytes = kMaxSegmentBytes / SavedRowBytes(dim, slots);
  return by_bytes < 1 ? 1 : (by_bytes < 65536 ? by_bytes : 65536);
}

// SYNC: waits until every table is at exactly `step` (held there by
// HOLD_AT). DeadlineExceeded when one is behind at `deadline`, Cancelled
// when `cancelled` says so, FailedPrecondition when one passed it.
absl::Status WaitForTablesAtStep(const std::vector<EmbeddingTable*>& tables,
                                 int64_t step, absl::Time deadline,
                                 const std::function<bool()>& cancelled);

// Appends every table's rows to `file` in segments and describes them in
// `response`. With sync_step > 0, a table that moved off it fails.
absl::Status WriteTables(const std::vector<EmbeddingTable*>& tables,
                         int64_t sync_step, WritableFile& file,
                         SaveShardResponse& response);

// Checks a restore's tables before anything is read: every table on the
// server is a target once, dimensions agree, segments are well formed.
absl::Status CheckTableTargets(const RestoreShardRequest& request,
                               const std::vector<EmbeddingTable*>& tables);

// Reads every segment and checks its CRC (DataLoss naming the file and the
// table otherwise), and that the rows this server owns fit its row-memory
// budget (ResourceExhausted otherwise), so that the commit cannot fail
// for want of room halfway. Returns the bytes read. `tables` passed
// CheckTableTargets.
absl::StatusOr<int64_t> CheckTableSources(
    const RestoreShardRequest& request,
    const std::vector<EmbeddingTable*>& tables);

// Replaces every table's rows with the rows of the segments this server
// owns (RowServer(id, num_ps) == ps_index), re-checking every CRC, and
// sets every table's version to the request's global step.
absl::Status ApplyTables(const RestoreShardRequest& request,
                         const std::vector<EmbeddingTable*>& tables);

}  // namespace psflow

#endif  // PSFLOW_PS_TABLE_CHECKPOINT_H_
