#include "checkpoint/index_file.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

constexpr char kMagic[] = "psflowCK";  // 8 bytes, no terminator written
constexpr size_t kHeaderBytes = 8 + 4 + 8;
constexpr size_t kFooterBytes = 4;

void PutFixed32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void PutFixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
uint32_t GetFixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}
uint64_t GetFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

std::string TensorLabel(const CheckpointTensor& t) {
  return t.slot().empty()
             ? absl::StrCat("\"", t.name(), "\"")
             : absl::StrCat("\"", t.name(), "\" slot \"", t.slot(), "\"");
}

}  // namespace

std::string EncodeIndexFile(const CheckpointIndex& index) {
  const std::string body = index.SerializeAsString();
  std::string out(kMagic, 8);
  PutFixed32(out, index.format_version());
  PutFixed64(out, body.size());
  out += body;
  PutFixed32(out, MaskCrc32c(Crc32c(body)));
  return out;
}

absl::StatusOr<CheckpointIndex> DecodeIndexFile(
    const std::string& bytes, const std::string& path_for_errors) {
  auto damaged = [&](absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat("checkpoint index ", path_for_errors, " ", what,
                     "; the checkpoint is damaged: use another one"));
  };
  if (bytes.size() < kHeaderBytes + kFooterBytes) {
    return damaged(
        absl::StrCat("is ", bytes.size(), " bytes, too short for an index"));
  }
  // Also keeps the body's size a valid int for ParseFromArray below.
  if (bytes.size() > static_cast<uint64_t>(kMaxIndexFileBytes)) {
    return damaged(absl::StrCat("is ", bytes.size(),
                                " bytes; an index is at most ",
                                kMaxIndexFileBytes, " bytes"));
  }
  if (std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return damaged("does not start with the psflow index magic");
  }
  const uint32_t version = GetFixed32(bytes.data() + 8);
  if (version != kCheckpointFormatVersion &&
      version != kCheckpointFormatVersionDenseOnly) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint index ", path_for_errors, " has format version ", version,
        "; this release reads versions ", kCheckpointFormatVersionDenseOnly,
        " and ", kCheckpointFormatVersion));
  }
  const uint64_t length = GetFixed64(bytes.data() + 12);
  if (length != bytes.size() - kHeaderBytes - kFooterBytes) {
    return damaged(absl::StrCat("declares ", length, " bytes of index but has ",
                                bytes.size() - kHeaderBytes - kFooterBytes,
                                " (truncated or extended)"));
  }
  const absl::string_view body(bytes.data() + kHeaderBytes, length);
  const uint32_t stored =
      UnmaskCrc32c(GetFixed32(bytes.data() + kHeaderBytes + length));
  if (Crc32c(body) != stored) return damaged("fails its CRC-32C check");
  CheckpointIndex index;
  if (!index.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return damaged("does not parse");
  }
  if (index.format_version() != version) {
    return damaged(absl::StrCat("records format version ",
                                index.format_version(), " inside a version ",
                                version, " file"));
  }
  absl::Status valid = ValidateIndex(index);
  if (!valid.ok()) return damaged(valid.message());
  return index;
}

absl::Status WriteIndexFile(const std::string& path,
                            const CheckpointIndex& index) {
  ASSIGN_OR_RETURN(WritableFile file, WritableFile::CreateNew(path));
  RETURN_IF_ERROR(file.Append(EncodeIndexFile(index)));
  RETURN_IF_ERROR(file.Sync());
  return file.Close();
}

absl::StatusOr<CheckpointIndex> ReadIndexFile(const std::string& path) {
  absl::StatusOr<std::string> bytes =
      ReadFileToString(path, kMaxIndexFileBytes);
  // InvalidArgument: over the limit (refused before reading). Reading such
  // a file whole could exhaust memory; no real index comes near it.
  if (absl::IsInvalidArgument(bytes.status())) {
    ASSIGN_OR_RETURN(const int64_t size, FileSize(path));
    return absl::DataLossError(
        absl::StrCat("checkpoint index ", path, " is ", size,
                     " bytes; an index is at most ", kMaxIndexFileBytes,
                     " bytes; the checkpoint is damaged: use another one"));
  }
  RETURN_IF_ERROR(bytes.status());
  return DecodeIndexFile(*bytes, path);
}

absl::Status ValidateIndex(const CheckpointIndex& index) {
  std::map<std::string, int64_t> file_sizes;
  for (const CheckpointFile& f : index.files()) {
    if (f.name().empty() || f.name().find('/') != std::string::npos ||
        f.size() < 0 || !file_sizes.emplace(f.name(), f.size()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "has a bad or repeated data file entry \"", f.name(), "\""));
    }
  }
  std::map<std::pair<std::string, std::string>, bool> seen;
  for (const CheckpointTensor& t : index.tensors()) {
    if (t.name().empty() ||
        !seen.emplace(std::make_pair(t.name(), t.slot()), true).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("lists tensor ", TensorLabel(t), " twice or unnamed"));
    }
    if (t.dtype() != "float32") {
      return absl::InvalidArgumentError(
          absl::StrCat("gives tensor ", TensorLabel(t), " dtype \"", t.dtype(),
                       "\"; only float32 is known"));
    }
    int64_t elements = 1;
    for (int64_t d : t.shape()) {
      if (d <= 0 || elements > (int64_t{1} << 40) / d) {
        return absl::InvalidArgumentError(
            absl::StrCat("gives tensor ", TensorLabel(t), " a bad shape [",
                         absl::StrJoin(t.shape(), ", "), "]"));
      }
      elements *= d;
    }
    int64_t next = 0;
    for (const CheckpointSlice& s : t.slices()) {
      auto file = file_sizes.find(s.file());
      // Bounded before any arithmetic: num_elements by what is left of the
      // tensor (at most 2^40), file_offset by the file's size less the
      // slice's bytes. Sums of unchecked values could wrap around int64
      // and "fit".
      if (s.element_offset() != next || s.num_elements() <= 0 ||
          s.num_elements() > elements - next || file == file_sizes.end() ||
          s.file_offset() < 0 ||
          s.file_offset() > file->second - s.num_elements() * 4) {
        return absl::InvalidArgumentError(
            absl::StrCat("has a bad slice of tensor ", TensorLabel(t),
                         " at element ", s.element_offset(),
                         " (slices must tile the tensor in order and "
                         "lie inside a listed data file)"));
      }
      next += s.num_elements();
    }
    if (next != elements) {
      return absl::InvalidArgumentError(
          absl::StrCat("covers ", next, " of the ", elements,
                       " elements of tensor ", TensorLabel(t)));
    }
  }
  if (index.tables_size() > 0 &&
      index.format_version() < kCheckpointFormatVersion) {
    return absl::InvalidArgumentError(
        "has embedding tables in a version 1 index");
  }
  std::set<std::string> table_names;
  for (const CheckpointTable& t : index.tables()) {
    if (t.name().empty() || !table_names.insert(t.name()).second ||
        seen.count({t.name(), ""}) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("lists embedding table '", t.name(),
                       "' twice, unnamed or with a tensor's name"));
    }
    if (t.dim() < 1 || t.dim() > 4096 || t.slots_size() > 8) {
      return absl::InvalidArgumentError(
          absl::StrCat("gives embedding table '", t.name(), "' dimension ",
                       t.dim(), " and ", t.slots_size(), " slots"));
    }
    const int64_t row_bytes = 24 + int64_t{4} * t.dim() * (1 + t.slots_size());
    int64_t rows = 0;
    for (const CheckpointRowSegment& s : t.segments()) {
      auto file = file_sizes.find(s.file());
      // A segment holds at most 64 MiB or one row (ps/table_checkpoint.h).
      if (file == file_sizes.end() || s.num_rows() < 1 ||
          s.num_rows() >
              std::max<int64_t>(1, (int64_t{64} << 20) / row_bytes) ||
          s.bytes() != s.num_rows() * row_bytes || s.file_offset() < 0 ||
          s.file_offset() > file->second - s.bytes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "has a bad segment of embedding table '", t.name(),
            "' (segments must hold whole rows and lie inside a listed "
            "data file)"));
      }
      rows += s.num_rows();
    }
    if (rows != t.num_rows()) {
      return absl::InvalidArgumentError(
          absl::StrCat("says embedding table '", t.name(), "' has ",
                       t.num_rows(), " rows but its segments hold ", rows));
    }
  }
  return absl::OkStatus();
}

}  // namespace psflow
