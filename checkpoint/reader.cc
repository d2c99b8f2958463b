#include "checkpoint/reader.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/index_file.h"
#include "checkpoint/paths.h"
#include "common/crc32c.h"
#include "common/status_macros.h"

namespace psflow {

std::string TensorDisplayName(const CheckpointTensor& tensor) {
  return tensor.slot().empty()
             ? tensor.name()
             : absl::StrCat(tensor.name(), "@", tensor.slot());
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    const std::string& path) {
  if (!IsDirectory(path)) {
    return absl::NotFoundError(absl::StrCat(
        path,
        " is not a checkpoint directory (expected <dir>/ckpt-<step>; "
        "`psctl ckpt list <dir>` shows them)"));
  }
  std::unique_ptr<CheckpointReader> reader(new CheckpointReader);
  reader->path_ = path;
  absl::StatusOr<CheckpointIndex> index =
      ReadIndexFile(JoinPath(path, kIndexFileName));
  if (absl::IsNotFound(index.status())) {
    return absl::DataLossError(absl::StrCat(
        path, " has no index file: it is not a complete checkpoint"));
  }
  RETURN_IF_ERROR(index.status());
  reader->index_ = *std::move(index);
  for (const CheckpointFile& f : reader->index_.files()) {
    const std::string file_path = JoinPath(path, f.name());
    absl::StatusOr<RandomAccessFile> file = RandomAccessFile::Open(file_path);
    if (!file.ok()) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint ", path, ": data file ", f.name(),
          " is missing or unreadable (", file.status().message(), ")"));
    }
    if (file->size() != f.size()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", path, ": data file ", f.name(), " is ",
                       file->size(), " bytes, but the index says ", f.size(),
                       " (truncated or overwritten)"));
    }
    reader->files_.emplace(f.name(), *std::move(file));
  }
  return reader;
}

const CheckpointTensor* CheckpointReader::Find(const std::string& name,
                                               const std::string& slot) const {
  for (const CheckpointTensor& t : index_.tensors()) {
    if (t.name() == name && t.slot() == slot) return &t;
  }
  return nullptr;
}

absl::Status CheckpointReader::ReadPieces(
    const CheckpointTensor& tensor,
    const std::function<absl::Status(absl::Span<const float>)>& consume) const {
  constexpr int64_t kPieceElements = kMaxPieceBytes / sizeof(float);
  std::vector<float> piece;
  for (const CheckpointSlice& slice : tensor.slices()) {
    const RandomAccessFile& file = files_.at(slice.file());
    uint32_t crc = 0;
    for (int64_t done = 0; done < slice.num_elements();) {
      const int64_t n = std::min(kPieceElements, slice.num_elements() - done);
      piece.resize(n);
      char* dst = reinterpret_cast<char*>(piece.data());
      const int64_t bytes = n * int64_t{sizeof(float)};
      absl::Status read = file.Read(
          slice.file_offset() + done * int64_t{sizeof(float)}, bytes, dst);
      if (!read.ok()) {
        return absl::DataLossError(absl::StrCat(
            "tensor ", TensorDisplayName(tensor), ": ", read.message()));
      }
      crc = Crc32c(absl::string_view(dst, bytes), crc);
      RETURN_IF_ERROR(consume(piece));
      done += n;
    }
    if (crc != slice.crc32c()) {
      return absl::DataLossError(absl::StrCat(
          "tensor ", TensorDisplayName(tensor), " elements [",
          slice.element_offset(), ", ",
          slice.element_offset() + slice.num_elements(), ") in ",
          JoinPath(path_, slice.file()), " at byte ", slice.file_offset(),
          ": CRC-32C mismatch (stored ", slice.crc32c(), ", computed ", crc,
          "); the data is damaged"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CheckpointReader::Read(
    const CheckpointTensor& tensor) const {
  std::vector<float> values;
  RETURN_IF_ERROR(ReadPieces(tensor, [&](absl::Span<const float> piece) {
    values.insert(values.end(), piece.begin(), piece.end());
    return absl::OkStatus();
  }));
  return values;
}

std::vector<std::string> CheckpointReader::Verify(
    const std::function<void(const CheckpointTensor&)>& progress) const {
  std::vector<std::string> problems;
  for (const CheckpointTensor& t : index_.tensors()) {
    if (progress) progress(t);
    absl::Status read =
        ReadPieces(t, [](absl::Span<const float>) { return absl::OkStatus(); });
    if (!read.ok()) problems.emplace_back(read.message());
  }
  for (const CheckpointTable& t : index_.tables()) {
    absl::Status read =
        ReadTable(t, [](const RowSegment&) { return absl::OkStatus(); });
    if (!read.ok()) problems.emplace_back(read.message());
  }
  return problems;
}

const CheckpointTable* CheckpointReader::FindTable(
    const std::string& name) const {
  for (const CheckpointTable& t : index_.tables()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

absl::Status CheckpointReader::ReadTable(
    const CheckpointTable& table,
    const std::function<absl::Status(const RowSegment&)>& consume) const {
  // int64 storage keeps every column aligned (ids and counts are int64,
  // values float32 after 24 bytes per row).
  std::vector<int64_t> storage;
  // A table holds each id once: a checkpoint that says otherwise is
  // damaged, whichever tool reads it.
  absl::flat_hash_set<int64_t> seen;
  for (const CheckpointRowSegment& s : table.segments()) {
    // ValidateIndex bounded the segment to 64 MiB inside its file.
    const RandomAccessFile& file = files_.at(s.file());
    storage.resize((s.bytes() + 7) / 8);
    char* data = reinterpret_cast<char*>(storage.data());
    absl::Status read = file.Read(s.file_offset(), s.bytes(), data);
    if (!read.ok()) {
      return absl::DataLossError(absl::StrCat("embedding table '", table.name(),
                                              "': ", read.message()));
    }
    const uint32_t crc = Crc32c(absl::string_view(data, s.bytes()));
    if (crc != s.crc32c()) {
      return absl::DataLossError(absl::StrCat(
          "embedding table '", table.name(), "': ", s.num_rows(), " rows in ",
          JoinPath(path_, s.file()), " at byte ", s.file_offset(),
          ": CRC-32C mismatch (stored ", s.crc32c(), ", computed ", crc,
          "); the data is damaged"));
    }
    const int64_t n = s.num_rows();
    for (int64_t r = 0; r < n; ++r) {
      const int64_t id = storage[r];
      if (!seen.insert(id).second) {
        return absl::DataLossError(absl::StrCat(
            "embedding table '", table.name(), "': the rows in ",
            JoinPath(path_, s.file()), " at byte ", s.file_offset(),
            " hold id ", id,
            " a second time; a table holds each id once: the checkpoint is "
            "damaged"));
      }
    }
    RowSegment segment;
    segment.num_rows = n;
    segment.ids = absl::MakeConstSpan(storage.data(), n);
    segment.updates = absl::MakeConstSpan(storage.data() + n, n);
    segment.last_steps = absl::MakeConstSpan(storage.data() + 2 * n, n);
    const float* floats =
        reinterpret_cast<const float*>(storage.data() + 3 * n);
    const int64_t column = n * table.dim();
    segment.values = absl::MakeConstSpan(floats, column);
    for (int k = 0; k < table.slots_size(); ++k) {
      segment.slots.push_back(
          absl::MakeConstSpan(floats + (k + 1) * column, column));
    }
    RETURN_IF_ERROR(consume(segment));
  }
  return absl::OkStatus();
}

}  // namespace psflow
