// Writes a checkpoint's tensors in formats other tools read:
//
//  - safetensors (https://github.com/huggingface/safetensors): an 8-byte
//    header length, a JSON header with dtype "F32", shape and data offsets
//    per tensor, then the raw little-endian data;
//  - NumPy .npz: an uncompressed zip of one .npy (format 1.0) per tensor,
//    what numpy.savez writes and numpy.load reads.
//
// Tensors keep their model names ("dense_0/kernel"); optimizer slots, when
// included, are "<name>@<slot>". The global step goes into safetensors'
// __metadata__ (npz has no place for it).
#ifndef PSFLOW_CHECKPOINT_EXPORT_H_
#define PSFLOW_CHECKPOINT_EXPORT_H_

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
};

// Streams every exported tensor (CRC-checked) into `out_path`, in pieces
// of bounded size whatever the checkpoint's size, and replaces the file
// atomically once it is complete (a damaged checkpoint leaves no file).
// Returns the number of tensors written.
absl::StatusOr<int> ExportCheckpoint(const CheckpointReader& reader,
                                     const std::string& out_path,
                                     const ExportOptions& options);

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_EXPORT_H_
