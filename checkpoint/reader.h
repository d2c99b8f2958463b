// Reads a checkpoint directory: its index, and any tensor's values with
// every slice's CRC checked. What `psctl ckpt inspect/verify/export` and
// the evaluator use.
#ifndef PSFLOW_CHECKPOINT_READER_H_
#define PSFLOW_CHECKPOINT_READER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/file_util.h"
#include "proto/checkpoint.pb.h"

namespace psflow {

class CheckpointReader {
 public:
  // Reads and checks the index and that every data file has its recorded
  // size. NotFound when `path` is not a checkpoint; DataLoss when damaged.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(
      const std::string& path);

  const std::string& path() const { return path_; }
  const CheckpointIndex& index() const { return index_; }

  // The tensor, or nullptr.
  const CheckpointTensor* Find(const std::string& name,
                               const std::string& slot = "") const;

  // Every element of `tensor`, each slice CRC-checked (DataLoss naming the
  // tensor, file and offset).
  absl::StatusOr<std::vector<float>> Read(const CheckpointTensor& tensor) const;

  // Streams `tensor`'s elements in order to `consume`, in pieces of at
  // most kMaxPieceBytes, so that a tensor of any size is read in bounded
  // memory. A slice's CRC is checked once its last piece was read: on
  // DataLoss, pieces of the damaged slice were already consumed (a writer
  // must discard what it wrote). An error from `consume` stops the read.
  static constexpr int64_t kMaxPieceBytes = int64_t{16} << 20;
  absl::Status ReadPieces(
      const CheckpointTensor& tensor,
      const std::function<absl::Status(absl::Span<const float>)>& consume)
      const;

  // One segment of an embedding table's rows, as read.
  struct RowSegment {
    int64_t num_rows = 0;
    absl::Span<const int64_t> ids, updates, last_steps;
    absl::Span<const float> values;              // num_rows x dim
    std::vector<absl::Span<const float>> slots;  // each num_rows x dim
  };

  // Reads `table`'s segments in order, each whole (at most 64 MiB) and
  // CRC-checked before `consume` sees it (DataLoss naming the table, file
  // and offset). An error from `consume` stops the read.
  absl::Status ReadTable(
      const CheckpointTable& table,
      const std::function<absl::Status(const RowSegment&)>& consume) const;

  // The table, or nullptr.
  const CheckpointTable* FindTable(const std::string& name) const;

  // Reads every slice of every tensor and every table's segments (in
  // bounded memory); returns one line per problem (empty when the
  // checkpoint is intact). `progress` is called per tensor.
  std::vector<std::string> Verify(
      const std::function<void(const CheckpointTensor&)>& progress =
          nullptr) const;

 private:
  CheckpointReader() = default;
  std::string path_;
  CheckpointIndex index_;
  std::map<std::string, RandomAccessFile> files_;
};

// "dense_0/kernel" or "dense_0/kernel@m": how a slot is named where one
// name must say both (export, inspect).
std::string TensorDisplayName(const CheckpointTensor& tensor);

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_READER_H_
