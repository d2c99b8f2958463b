// Keeps a copy of the best checkpoint so far, for the evaluator:
//
//   <checkpoint dir>/best/ckpt-<step>/   the copy (hard links when the
//                                        filesystem allows, else copies)
//   <checkpoint dir>/best/checkpoint     a state file naming it
//   <checkpoint dir>/best/eval.json      {"step", "accuracy", "loss"}
//
// The copy is complete before the state file names it, and the previous
// best is removed only after; `psctl ckpt list <dir>/best` and restores
// work on it like on any checkpoint directory.
#ifndef PSFLOW_CHECKPOINT_BEST_COPY_H_
#define PSFLOW_CHECKPOINT_BEST_COPY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace psflow {

struct BestRecord {
  int64_t step = 0;
  double accuracy = 0;
  double loss = 0;
};

// "<dir>/best".
std::string BestDirectory(const std::string& checkpoint_dir);

// The recorded best, or nullopt when there is none yet.
absl::StatusOr<std::optional<BestRecord>> ReadBest(
    const std::string& checkpoint_dir);

// Copies `checkpoint` (a ckpt-<step> directory) as the new best.
// InvalidArgument, with nothing changed, for a record ReadBest would not
// read back: a step outside 0..2^53, an accuracy outside 0..1, or a loss
// that is negative or not finite (never written as inf or nan).
absl::Status KeepAsBest(const std::string& checkpoint_dir,
                        const std::string& checkpoint,
                        const BestRecord& record);

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_BEST_COPY_H_
