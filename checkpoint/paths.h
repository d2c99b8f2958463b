// Names inside a checkpoint directory (docs/checkpoint-format.md):
//
//   <dir>/checkpoint                  state file: newest and kept checkpoints
//   <dir>/ckpt-<step>/index           what every tensor is and where
//   <dir>/ckpt-<step>/data-00000-of-00002   one per parameter server
//   <dir>/ckpt-<step>.tmp-<random>/   a checkpoint being written
#ifndef PSFLOW_CHECKPOINT_PATHS_H_
#define PSFLOW_CHECKPOINT_PATHS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace psflow {

inline constexpr char kStateFileName[] = "checkpoint";
inline constexpr char kIndexFileName[] = "index";

// "ckpt-1200".
std::string CheckpointName(int64_t step);

// The step of a "ckpt-<step>" name; nullopt for anything else (temporary
// directories included).
std::optional<int64_t> ParseCheckpointName(absl::string_view name);

// A fresh temporary name for a checkpoint being written.
std::string TemporaryCheckpointName();

// Whether `name` is a temporary checkpoint directory (left by a crash if
// no save is running).
bool IsTemporaryCheckpointName(absl::string_view name);

// "data-00001-of-00003".
std::string DataFileName(int ps, int num_ps);

// `dir`/`name`.
std::string JoinPath(absl::string_view dir, absl::string_view name);

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_PATHS_H_
