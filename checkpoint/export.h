// Writes a checkpoint's tensors in formats other tools read:
//
//  - safetensors (https://github.com/huggingface/safetensors): an 8-byte
//    header length, a JSON header with dtype "F32", shape and data offsets
//    per tensor, then the raw little-endian data;
//  - NumPy .npz: an uncompressed zip of one .npy (format 1.0) per tensor,
//    what numpy.savez writes and numpy.load reads.
//
// Tensors keep their model names ("dense_0/kernel"); optimizer slots, when
// included, are "<name>@<slot>". Metadata (the global step, and what the
// caller adds: the model's config, the kernels' layout, the input's
// preprocessing) goes into safetensors' __metadata__ and, as one JSON
// object, into the npz's "__metadata__.json" member, so that nobody has to
// guess the architecture or the layouts.
#ifndef PSFLOW_CHECKPOINT_EXPORT_H_
#define PSFLOW_CHECKPOINT_EXPORT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/reader.h"

namespace psflow {

enum class ExportFormat { kSafetensors, kNpz };

// "safetensors" or "npz"; InvalidArgument naming the choices otherwise.
absl::StatusOr<ExportFormat> ParseExportFormat(const std::string& name);

struct ExportOptions {
  ExportFormat format = ExportFormat::kSafetensors;
  bool include_slots = false;
  // Written beside "producer" and "global_step" (which this fills in); the
  // values are strings, as safetensors requires.
  std::map<std::string, std::string> metadata;
};

// The npz member holding the metadata.
inline constexpr char kNpzMetadataMember[] = "__metadata__.json";

// Streams every exported tensor (CRC-checked) into `out_path`, in pieces
// of bounded size whatever the checkpoint's size, and replaces the file
// atomically once it is complete (a damaged checkpoint leaves no file).
// Returns the number of tensors written.
absl::StatusOr<int> ExportCheckpoint(const CheckpointReader& reader,
                                     const std::string& out_path,
                                     const ExportOptions& options);

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_EXPORT_H_
