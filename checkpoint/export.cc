#include "checkpoint/export.h"

#include <unistd.h>

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "zlib.h"

namespace psflow {
namespace {

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>(v >> (8 * i)));
}

absl::string_view Bytes(absl::Span<const float> v) {
  return absl::string_view(reinterpret_cast<const char*>(v.data()),
                           v.size() * sizeof(float));
}

// A tensor to export: what the headers need, without its values (they are
// streamed from the checkpoint, CheckpointReader::ReadPieces), or one
// column of an embedding table (its ids, values or a slot, read segment by
// segment with CheckpointReader::ReadTable).
struct Exported {
  const CheckpointTensor* tensor = nullptr;
  std::string name;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  // Tables: the table and the column, -1 for the ids (int64), 0 for the
  // values, k for slot k - 1 (float32).
  const CheckpointTable* table = nullptr;
  int column = 0;
  bool is_int64() const { return table != nullptr && column < 0; }
};

std::vector<Exported> ListExported(const CheckpointReader& reader,
                                   bool include_slots) {
  std::vector<Exported> out;
  for (const CheckpointTensor& t : reader.index().tensors()) {
    if (!t.slot().empty() && !include_slots) continue;
    uint64_t elements = 0;
    for (const CheckpointSlice& slice : t.slices()) {
      elements += slice.num_elements();
    }
    Exported e;
    e.tensor = &t;
    e.name = TensorDisplayName(t);
    e.shape = {t.shape().begin(), t.shape().end()};
    e.bytes = elements * sizeof(float);
    out.push_back(std::move(e));
  }
  // Tables: "<table>/ids" (int64, rows) and "<table>/values" (float32,
  // rows x dim) in the same row order; slots "<table>/values@<slot>".
  for (const CheckpointTable& t : reader.index().tables()) {
    const int columns = include_slots ? 1 + t.slots_size() : 1;
    for (int column = -1; column < columns; ++column) {
      Exported e;
      e.table = &t;
      e.column = column;
      if (column < 0) {
        e.name = t.name() + "/ids";
        e.shape = {t.num_rows()};
        e.bytes = t.num_rows() * sizeof(int64_t);
      } else {
        e.name = column == 0
                     ? t.name() + "/values"
                     : absl::StrCat(t.name(), "/values@", t.slots(column - 1));
        e.shape = {t.num_rows(), t.dim()};
        e.bytes = t.num_rows() * t.dim() * sizeof(float);
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

// Appends every value of `t` to `file`, piece by piece; `crc`, when given,
// accumulates zlib's CRC-32 of the bytes.
absl::Status StreamValues(const CheckpointReader& reader, const Exported& t,
                          WritableFile& file, uint32_t* crc = nullptr) {
  auto append = [&](absl::string_view bytes) {
    if (crc != nullptr) {
      *crc = static_cast<uint32_t>(
          crc32(*crc, reinterpret_cast<const Bytef*>(bytes.data()),
                static_cast<uInt>(bytes.size())));
    }
    return file.Append(bytes);
  };
  if (t.table != nullptr) {
    return reader.ReadTable(
        *t.table, [&](const CheckpointReader::RowSegment& segment) {
          if (t.column < 0) {
            return append(absl::string_view(
                reinterpret_cast<const char*>(segment.ids.data()),
                segment.ids.size() * sizeof(int64_t)));
          }
          return append(Bytes(t.column == 0 ? segment.values
                                            : segment.slots[t.column - 1]));
        });
  }
  return reader.ReadPieces(*t.tensor, [&](absl::Span<const float> piece) {
    return append(Bytes(piece));
  });
}

// The metadata as a JSON object of strings, `extra` entries first.
std::string MetadataJson(const std::map<std::string, std::string>& extra,
                         const CheckpointIndex& index,
                         const std::map<std::string, std::string>& metadata) {
  std::map<std::string, std::string> all = metadata;
  all["global_step"] = absl::StrCat(index.global_step());
  all["producer"] = "psflow";
  std::string json = "{";
  for (const auto& entries : {extra, all}) {
    for (const auto& [key, value] : entries) {
      if (json.size() > 1) json += ",";
      absl::StrAppend(&json, JsonQuote(key), ":", JsonQuote(value));
    }
  }
  return json + "}";
}

std::string SafetensorsHeader(const std::vector<Exported>& tensors,
                              const CheckpointIndex& index,
                              const std::map<std::string, std::string>& meta) {
  std::string header = absl::StrCat(
      "{\"__metadata__\":", MetadataJson({{"format", "pt"}}, index, meta));
  uint64_t offset = 0;
  for (const Exported& t : tensors) {
    absl::StrAppend(&header, ",", JsonQuote(t.name), ":{\"dtype\":\"",
                    t.is_int64() ? "I64" : "F32", "\",\"shape\":[",
                    absl::StrJoin(t.shape, ","), "],\"data_offsets\":[", offset,
                    ",", offset + t.bytes, "]}");
    offset += t.bytes;
  }
  header += "}";
  // Pad with spaces so the data starts 8-byte aligned (as the spec allows).
  while ((header.size() % 8) != 0) header += ' ';
  std::string out;
  PutLe(out, header.size(), 8);
  out += header;
  return out;
}

absl::Status WriteSafetensors(const CheckpointReader& reader,
                              const std::vector<Exported>& tensors,
                              const std::map<std::string, std::string>& meta,
                              WritableFile& file) {
  RETURN_IF_ERROR(
      file.Append(SafetensorsHeader(tensors, reader.index(), meta)));
  for (const Exported& t : tensors) {
    RETURN_IF_ERROR(StreamValues(reader, t, file));
  }
  return absl::OkStatus();
}

// The header of one .npy (format 1.0), padded so data is 64-byte aligned.
std::string NpyHeader(const Exported& t) {
  // Python tuple syntax: (3,) but (2, 5) and ().
  std::string dict = absl::StrCat("{'descr': '", t.is_int64() ? "<i8" : "<f4",
                                  "', 'fortran_order': False, 'shape': (",
                                  absl::StrJoin(t.shape, ", "),
                                  t.shape.size() == 1 ? "," : "", "), }");
  const size_t prefix = 10;  // magic (6) + version (2) + length (2)
  size_t total = prefix + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  PutLe(out, dict.size(), 2);
  out += dict;
  return out;
}

constexpr uint32_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01
constexpr uint16_t kDataDescriptorFlag = 0x0008;

// Appends one stored zip member named `name`: `head`, then `t`'s values
// when `t` is not null; adds its central directory entry to `central`.
// The CRC-32 follows the data in a data descriptor (flag bit 3), since it
// is known only once the values went by.
absl::Status AppendZipMember(const CheckpointReader& reader,
                             const std::string& name, const std::string& head,
                             const Exported* t, WritableFile& file,
                             std::string& central) {
  const uint64_t size = head.size() + (t != nullptr ? t->bytes : 0);
  const uint64_t local_offset = file.size();
  if (size >= 0xffffffffu || local_offset + size + 128 >= 0xffffffffu) {
    return absl::OutOfRangeError(absl::StrCat(
        name,
        " makes the .npz larger than 4 GiB, which needs zip64; export "
        "with --format=safetensors instead"));
  }
  std::string local;
  PutLe(local, 0x04034b50, 4);
  PutLe(local, 20, 2);  // version needed: 2.0
  PutLe(local, kDataDescriptorFlag, 2);
  PutLe(local, 0, 2);  // stored, no compression
  PutLe(local, 0, 2);  // time
  PutLe(local, kDosDate, 2);
  PutLe(local, 0, 4);  // CRC-32, sizes: in the data descriptor
  PutLe(local, 0, 4);
  PutLe(local, 0, 4);
  PutLe(local, name.size(), 2);
  PutLe(local, 0, 2);  // extra field length
  local += name;
  local += head;
  RETURN_IF_ERROR(file.Append(local));
  uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(head.data()),
            static_cast<uInt>(head.size())));
  if (t != nullptr) RETURN_IF_ERROR(StreamValues(reader, *t, file, &crc));
  std::string descriptor;
  PutLe(descriptor, 0x08074b50, 4);
  PutLe(descriptor, crc, 4);
  PutLe(descriptor, size, 4);
  PutLe(descriptor, size, 4);
  RETURN_IF_ERROR(file.Append(descriptor));

  PutLe(central, 0x02014b50, 4);
  PutLe(central, 20, 2);  // version made by
  PutLe(central, 20, 2);  // version needed
  PutLe(central, kDataDescriptorFlag, 2);
  PutLe(central, 0, 2);  // stored
  PutLe(central, 0, 2);  // time
  PutLe(central, kDosDate, 2);
  PutLe(central, crc, 4);
  PutLe(central, size, 4);
  PutLe(central, size, 4);
  PutLe(central, name.size(), 2);
  PutLe(central, 0, 2);  // extra field length
  PutLe(central, 0, 2);  // comment length
  PutLe(central, 0, 2);  // disk number
  PutLe(central, 0, 2);  // internal attributes
  PutLe(central, 0, 4);  // external attributes
  PutLe(central, local_offset, 4);
  central += name;
  return absl::OkStatus();
}

// An uncompressed zip of one .npy per tensor, streamed, then the metadata
// as one JSON member (numpy.load lists it among the files and returns its
// bytes); the central directory repeats every member's CRC.
absl::Status WriteNpz(const CheckpointReader& reader,
                      const std::vector<Exported>& tensors,
                      const std::map<std::string, std::string>& meta,
                      WritableFile& file) {
  const size_t members = tensors.size() + 1;
  if (members >= 0xffff) {
    return absl::OutOfRangeError(
        "the .npz would need zip64 (over 65535 tensors); export with "
        "--format=safetensors instead");
  }
  std::string central;
  for (const Exported& t : tensors) {
    RETURN_IF_ERROR(AppendZipMember(reader, t.name + ".npy", NpyHeader(t), &t,
                                    file, central));
  }
  RETURN_IF_ERROR(AppendZipMember(reader, kNpzMetadataMember,
                                  MetadataJson({}, reader.index(), meta),
                                  nullptr, file, central));
  const uint64_t central_offset = file.size();
  if (central_offset + central.size() + 22 >= 0xffffffffu) {
    return absl::OutOfRangeError(
        "the .npz would need zip64 (over 4 GiB); export with "
        "--format=safetensors instead");
  }
  std::string end;
  PutLe(end, 0x06054b50, 4);
  PutLe(end, 0, 2);
  PutLe(end, 0, 2);
  PutLe(end, members, 2);
  PutLe(end, members, 2);
  PutLe(end, central.size(), 4);
  PutLe(end, central_offset, 4);
  PutLe(end, 0, 2);  // comment length
  RETURN_IF_ERROR(file.Append(central));
  return file.Append(end);
}

}  // namespace

absl::StatusOr<ExportFormat> ParseExportFormat(const std::string& name) {
  if (name == "safetensors") return ExportFormat::kSafetensors;
  if (name == "npz") return ExportFormat::kNpz;
  return absl::InvalidArgumentError(absl::StrCat(
      "--format=", name, " is not an export format; use safetensors or npz"));
}

absl::StatusOr<int> ExportCheckpoint(const CheckpointReader& reader,
                                     const std::string& out_path,
                                     const ExportOptions& options) {
  const std::vector<Exported> tensors =
      ListExported(reader, options.include_slots);
  // Written beside the target and renamed over it once complete and
  // synced: readers see the old file or the whole new one.
  // A random name created exclusively: never one that is there already
  // (an unrelated file or directory), which is left alone.
  RETURN_IF_ERROR(CheckReplaceableFile(out_path));
  const std::string temp =
      absl::StrCat(out_path, ".tmp-", std::random_device()());
  ASSIGN_OR_RETURN(WritableFile file, WritableFile::CreateNew(temp));
  absl::Status written =
      options.format == ExportFormat::kSafetensors
          ? WriteSafetensors(reader, tensors, options.metadata, file)
          : WriteNpz(reader, tensors, options.metadata, file);
  if (written.ok()) written = file.Sync();
  if (written.ok()) written = file.Close();
  if (written.ok()) written = RenamePath(temp, out_path);
  if (!written.ok()) {
    unlink(temp.c_str());
    return written;
  }
  RETURN_IF_ERROR(SyncDirectory(DirName(AbsolutePath(out_path))));
  return static_cast<int>(tensors.size());
}

}  // namespace psflow
