#include "checkpoint/best_copy.h"

#include <unistd.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/paths.h"
#include "checkpoint/state_file.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

constexpr char kRecordName[] = "eval.json";
// The record is one line of JSON; anything this large is not one.
constexpr int64_t kMaxRecordBytes = 64 << 10;
// A record's step is at most 2^53: whole numbers up to it are exact in a
// double.
constexpr int64_t kMaxRecordStep = int64_t{1} << 53;

// Hard link, or a copy where links are impossible (another filesystem).
absl::Status LinkOrCopy(const std::string& from, const std::string& to) {
  if (link(from.c_str(), to.c_str()) == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(from));
  ASSIGN_OR_RETURN(WritableFile file, WritableFile::CreateNew(to));
  RETURN_IF_ERROR(file.Append(bytes));
  RETURN_IF_ERROR(file.Sync());
  return file.Close();
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string BestDirectory(const std::string& checkpoint_dir) {
  return JoinPath(checkpoint_dir, "best");
}

absl::StatusOr<std::optional<BestRecord>> ReadBest(
    const std::string& checkpoint_dir) {
  const std::string path = JoinPath(BestDirectory(checkpoint_dir), kRecordName);
  auto damaged = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(
        path, " ", what,
        "; delete it to start afresh (the next evaluation records a new "
        "best)"));
  };
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxRecordBytes);
  if (absl::IsNotFound(text.status())) return std::optional<BestRecord>();
  // InvalidArgument: over the limit, refused before reading.
  if (absl::IsInvalidArgument(text.status())) {
    return damaged(absl::StrCat("is too large: a record is at most ",
                                kMaxRecordBytes, " bytes"));
  }
  RETURN_IF_ERROR(text.status());
  absl::StatusOr<JsonValue> json = ParseJson(*text);
  if (!json.ok()) {
    return damaged(
        absl::StrCat("is not valid JSON (", json.status().message(), ")"));
  }
  if (json->kind() != JsonValue::Kind::kObject) {
    return damaged("is not a JSON object");
  }
  // Each value's kind is checked before it is read (number_value() of a
  // string throws), and its range before it is converted.
  auto number = [&](absl::string_view key, double low, double high,
                    absl::string_view expected) -> absl::StatusOr<double> {
    const JsonValue* value = json->Find(key);
    if (value == nullptr) return damaged(absl::StrCat("lacks \"", key, "\""));
    if (value->kind() != JsonValue::Kind::kNumber ||
        !(value->number_value() >= low && value->number_value() <= high)) {
      return damaged(absl::StrCat("gives \"", key, "\" as ", value->Describe(),
                                  "; it must be ", expected));
    }
    return value->number_value();
  };
  ASSIGN_OR_RETURN(const double step, number("step", 0, kMaxRecordStep,
                                             "a whole number from 0 to 2^53"));
  if (step != std::floor(step)) {
    return damaged(absl::StrCat("gives \"step\" as ", step,
                                "; it must be a whole number from 0 to 2^53"));
  }
  ASSIGN_OR_RETURN(const double accuracy,
                   number("accuracy", 0, 1, "a number from 0 to 1"));
  ASSIGN_OR_RETURN(const double loss,
                   number("loss", 0, std::numeric_limits<double>::max(),
                          "a number not below 0"));
  return std::optional<BestRecord>(
      BestRecord{static_cast<int64_t>(step), accuracy, loss});
}

absl::Status KeepAsBest(const std::string& checkpoint_dir,
                        const std::string& checkpoint,
                        const BestRecord& record) {
  // The record is written only when ReadBest will read it back: a
  // non-finite loss or accuracy would be written as inf or nan, which is
  // not JSON, and is no evaluation to keep a model for anyway.
  if (!(record.step >= 0 && record.step <= kMaxRecordStep) ||
      !(record.accuracy >= 0 && record.accuracy <= 1) ||
      !(record.loss >= 0 && std::isfinite(record.loss))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not keeping ", checkpoint, " as the best checkpoint: its evaluation ",
        "(step ", record.step, ", accuracy ", record.accuracy, ", loss ",
        record.loss,
        ") is not a step from 0 to 2^53, an accuracy from 0 to 1 and a "
        "finite loss not below 0 (a loss of nan or inf: the model has "
        "diverged); ",
        BestDirectory(checkpoint_dir), " keeps the previous best"));
  }
  const std::string best = BestDirectory(checkpoint_dir);
  RETURN_IF_ERROR(MakeDirectories(best));
  const std::string temp = JoinPath(best, TemporaryCheckpointName());
  RETURN_IF_ERROR(MakeDirectories(temp));
  absl::Status copied = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<std::string> files, ListDirectory(checkpoint));
    for (const std::string& f : files) {
      RETURN_IF_ERROR(LinkOrCopy(JoinPath(checkpoint, f), JoinPath(temp, f)));
    }
    RETURN_IF_ERROR(SyncDirectory(temp));
    const std::string final_path = JoinPath(best, BaseName(checkpoint));
    RETURN_IF_ERROR(RemoveRecursively(final_path));
    RETURN_IF_ERROR(RenamePath(temp, final_path));
    return SyncDirectory(best);
  }();
  if (!copied.ok()) {
    (void)RemoveRecursively(temp);
    return copied;
  }
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(best);
  if (absl::IsNotFound(state.status())) state = CheckpointState();
  RETURN_IF_ERROR(state.status());
  RetentionPolicy keep_one;
  keep_one.max_to_keep = 1;
  const std::vector<std::string> doomed = AddCheckpoint(
      *state, BaseName(checkpoint),
      absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()), keep_one);
  RETURN_IF_ERROR(WriteCheckpointState(best, *state));
  RETURN_IF_ERROR(WriteFileAtomically(
      JoinPath(best, kRecordName),
      absl::StrFormat("{\"step\": %d, \"accuracy\": %.6f, \"loss\": %.6f, "
                      "\"checkpoint\": %s}\n",
                      record.step, record.accuracy, record.loss,
                      JsonQuote(BaseName(checkpoint)))));
  for (const std::string& old : doomed) {
    (void)RemoveRecursively(JoinPath(best, old));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> BestCheckpointKeeper::Offer(const std::string& checkpoint,
                                                 const BestRecord& record) {
  if (best_.has_value() && !(record.accuracy > best_->accuracy)) return false;
  RETURN_IF_ERROR(KeepAsBest(checkpoint_dir_, checkpoint, record));
  best_ = record;
  return true;
}

}  // namespace psflow
