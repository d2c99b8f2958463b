#include "checkpoint/export.h"

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

absl::string_view Bytes(const std::vector<float>& v) {
  return absl::string_view(reinterpret_cast<const char*>(v.data()),
                           v.size() * sizeof(float));
}

struct Exported {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

absl::StatusOr<std::vector<Exported>> ReadAll(const CheckpointReader& reader,
                                              bool include_slots) {
  std::vector<Exported> out;
  for (const CheckpointTensor& t : reader.index().tensors()) {
    if (!t.slot().empty() && !include_slots) continue;
    ASSIGN_OR_RETURN(std::vector<float> values, reader.Read(t));
    out.push_back(Exported{TensorDisplayName(t),
                           {t.shape().begin(), t.shape().end()},
                           std::move(values)});
  }
  return out;
}

std::string Safetensors(const std::vector<Exported>& tensors,
                        const CheckpointIndex& index) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"global_step\":";
  absl::StrAppend(&header, JsonQuote(absl::StrCat(index.global_step())),
                  ",\"producer\":\"psflow\"}");
  uint64_t offset = 0;
  for (const Exported& t : tensors) {
    const uint64_t size = t.values.size() * sizeof(float);
    absl::StrAppend(&header, ",", JsonQuote(t.name),
                    ":{\"dtype\":\"F32\",\"shape\":[",
                    absl::StrJoin(t.shape, ","), "],\"data_offsets\":[", offset,
                    ",", offset + size, "]}");
    offset += size;
  }
  header += "}";
  // Pad with spaces so the data starts 8-byte aligned (as the spec allows).
  while ((header.size() % 8) != 0) header += ' ';
  std::string out;
  PutLe(out, header.size(), 8);
  out += header;
  out.reserve(out.size() + offset);
  for (const Exported& t : tensors) absl::StrAppend(&out, Bytes(t.values));
  return out;
}

// One .npy file (format 1.0), header padded so data is 64-byte aligned.
std::string Npy(const Exported& t) {
  // Python tuple syntax: (3,) but (2, 5) and ().
  std::string dict = absl::StrCat(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (",
      absl::StrJoin(t.shape, ", "), t.shape.size() == 1 ? "," : "", "), }");
  const size_t prefix = 10;  // magic (6) + version (2) + length (2)
  size_t total = prefix + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  PutLe(out, dict.size(), 2);
  out += dict;
  absl::StrAppend(&out, Bytes(t.values));
  return out;
}

absl::StatusOr<std::string> Npz(const std::vector<Exported>& tensors) {
  std::string zip, central;
  constexpr uint32_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01
  for (const Exported& t : tensors) {
    const std::string name = t.name + ".npy";
    const std::string data = Npy(t);
    if (data.size() >= 0xffffffffu || zip.size() >= 0xffffffffu) {
      return absl::OutOfRangeError(absl::StrCat(
          "tensor ", t.name,
          " makes the .npz larger than 4 GiB, which "
          "needs zip64; export with --format=safetensors instead"));
    }
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(data.data()),
              static_cast<uInt>(data.size())));
    const uint64_t local_offset = zip.size();
    auto common = [&](std::string& out) {
      PutLe(out, 20, 2);  // version needed: 2.0
      PutLe(out, 0, 2);   // flags
      PutLe(out, 0, 2);   // stored, no compression
      PutLe(out, 0, 2);   // time
      PutLe(out, kDosDate, 2);
      PutLe(out, crc, 4);
      PutLe(out, data.size(), 4);
      PutLe(out, data.size(), 4);
      PutLe(out, name.size(), 2);
      PutLe(out, 0, 2);  // extra field length
    };
    PutLe(zip, 0x04034b50, 4);
    common(zip);
    zip += name;
    zip += data;
    PutLe(central, 0x02014b50, 4);
    PutLe(central, 20, 2);  // version made by
    common(central);
    PutLe(central, 0, 2);  // comment length
    PutLe(central, 0, 2);  // disk number
    PutLe(central, 0, 2);  // internal attributes
    PutLe(central, 0, 4);  // external attributes
    PutLe(central, local_offset, 4);
    central += name;
  }
  const uint64_t central_offset = zip.size();
  zip += central;
  PutLe(zip, 0x06054b50, 4);
  PutLe(zip, 0, 2);
  PutLe(zip, 0, 2);
  PutLe(zip, tensors.size(), 2);
  PutLe(zip, tensors.size(), 2);
  PutLe(zip, central.size(), 4);
  PutLe(zip, central_offset, 4);
  PutLe(zip, 0, 2);  // comment length
  if (tensors.size() >= 0xffff || zip.size() >= 0xffffffffu) {
    return absl::OutOfRangeError(
        "the .npz would need zip64 (over 65535 tensors or 4 GiB); export "
        "with --format=safetensors instead");
  }
  return zip;
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
  ASSIGN_OR_RETURN(std::vector<Exported> tensors,
                   ReadAll(reader, options.include_slots));
  std::string bytes;
  if (options.format == ExportFormat::kSafetensors) {
    bytes = Safetensors(tensors, reader.index());
  } else {
    ASSIGN_OR_RETURN(bytes, Npz(tensors));
  }
  RETURN_IF_ERROR(WriteFileAtomically(out_path, bytes));
  return static_cast<int>(tensors.size());
}

}  // namespace psflow
