// Reading and writing a checkpoint's index file. Framing, all integers
// little-endian (docs/checkpoint-format.md):
//
//   magic     8 bytes  "psflowCK"
//   version   u32      1, or 2 with embedding tables (below)
//   length    u64      N
//   index     N bytes  a serialized CheckpointIndex (proto/checkpoint.proto)
//   crc       u32      masked CRC-32C of the N index bytes
//
// Reading checks all of it and the index's own consistency (slices tile
// every tensor, files exist in the list), so later code can trust it.
#ifndef PSFLOW_CHECKPOINT_INDEX_FILE_H_
#define PSFLOW_CHECKPOINT_INDEX_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"

namespace psflow {

// Version 1: dense tensors only. Version 2 adds embedding tables; a
// checkpoint without tables is still written as version 1, so releases
// that read only version 1 keep reading it.
inline constexpr uint32_t kCheckpointFormatVersion = 2;
inline constexpr uint32_t kCheckpointFormatVersionDenseOnly = 1;

// The version an index is written with: 2 when it has tables, else 1.
inline uint32_t FormatVersionFor(const CheckpointIndex& index) {
  return index.tables_size() > 0 ? kCheckpointFormatVersion
                                 : kCheckpointFormatVersionDenseOnly;
}

// The file's bytes for `index`.
std::string EncodeIndexFile(const CheckpointIndex& index);

// DataLoss naming `path_for_errors` and what is wrong when the bytes are
// not a complete, intact, consistent index.
absl::StatusOr<CheckpointIndex> DecodeIndexFile(
    const std::string& bytes, const std::string& path_for_errors);

// Writes the index to `path` (a new file) and fsyncs it.
absl::Status WriteIndexFile(const std::string& path,
                            const CheckpointIndex& index);

// The largest index file read. An index lists each tensor's slices and
// each table's segments of up to 64 MiB: a few MiB even for terabytes of
// model. Well under 2 GiB, so its size is also a valid protobuf length.
inline constexpr int64_t kMaxIndexFileBytes = int64_t{256} << 20;

// NotFound when missing; DataLoss when damaged or larger than
// kMaxIndexFileBytes (refused before reading).
absl::StatusOr<CheckpointIndex> ReadIndexFile(const std::string& path);

// Checks that the index is self-consistent: known dtype, shapes, slices
// that tile each tensor, files listed. InvalidArgument naming the tensor.
absl::Status ValidateIndex(const CheckpointIndex& index);

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_INDEX_FILE_H_
