#include "checkpoint/best_copy.h"

#include <unistd.h>

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
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (absl::IsNotFound(text.status())) return std::optional<BestRecord>();
  RETURN_IF_ERROR(text.status());
  ASSIGN_OR_RETURN(JsonValue json, ParseJson(*text));
  const JsonValue* step = json.Find("step");
  const JsonValue* accuracy = json.Find("accuracy");
  const JsonValue* loss = json.Find("loss");
  if (step == nullptr || accuracy == nullptr || loss == nullptr) {
    return absl::DataLossError(absl::StrCat(
        path, " lacks step, accuracy or loss; delete it to start afresh"));
  }
  return std::optional<BestRecord>(
      BestRecord{static_cast<int64_t>(step->number_value()),
                 accuracy->number_value(), loss->number_value()});
}

absl::Status KeepAsBest(const std::string& checkpoint_dir,
                        const std::string& checkpoint,
                        const BestRecord& record) {
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

}  // namespace psflow
