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
#include <utility>

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

// The best checkpoint of one evaluation run: what `<dir>/best` holds and
// the accuracy a newer checkpoint must beat. Only what KeepAsBest copied
// counts as the best, so a record it refuses (a diverged model's loss) or
// a copy lost to I/O leaves the next checkpoint its chance.
class BestCheckpointKeeper {
 public:
  // `best`: what ReadBest found at the start (nullopt: nothing yet).
  BestCheckpointKeeper(std::string checkpoint_dir,
                       std::optional<BestRecord> best)
      : checkpoint_dir_(std::move(checkpoint_dir)), best_(best) {}

  // Copies `checkpoint` as the best when its accuracy beats the best so
  // far (or there is none). True when it became the best, false when it
  // did not beat it; KeepAsBest's error, with the best unchanged, when it
  // would have but could not be kept.
  absl::StatusOr<bool> Offer(const std::string& checkpoint,
                             const BestRecord& record);

  const std::optional<BestRecord>& best() const { return best_; }

 private:
  const std::string checkpoint_dir_;
  std::optional<BestRecord> best_;
};

}  // namespace psflow

#endif  // PSFLOW_CHECKPOINT_BEST_COPY_H_
