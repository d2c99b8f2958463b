#include "checkpoint/state_file.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/paths.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace psflow {

namespace {

// Keeps the first parse error for the message instead of letting protobuf
// log every one to stderr.
class FirstError final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) {
      first_ = absl::StrCat("line ", line + 1, ": ", message.substr(0, 200));
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber,
                  const std::string&) override {}
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// Why a parsed state file cannot be what WriteCheckpointState wrote (an
// empty or truncated file, a hand edit), or "" when it is consistent: a
// non-empty list of plain names (no directories) ending with the newest,
// one timestamp each.
std::string Inconsistency(const std::string& text,
                          const CheckpointState& state) {
  if (absl::StripAsciiWhitespace(text).empty()) return "it is empty";
  if (state.all_model_checkpoint_paths_size() !=
      state.all_model_checkpoint_timestamps_size()) {
    return "it lists a different number of checkpoints and timestamps";
  }
  if (state.model_checkpoint_path().empty() ||
      state.all_model_checkpoint_paths_size() == 0 ||
      state.all_model_checkpoint_paths(state.all_model_checkpoint_paths_size() -
                                       1) != state.model_checkpoint_path()) {
    return "its newest checkpoint is not the last one listed";
  }
  for (const std::string& name : state.all_model_checkpoint_paths()) {
    if (name.empty() || name == "." || name == ".." ||
        name.find('/') != std::string::npos) {
      return absl::StrCat("it lists \"", name.substr(0, 64),
                          "\", which is not a checkpoint's name");
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<CheckpointState> ParseCheckpointState(const std::string& text,
                                                     const std::string& path,
                                                     const std::string& dir) {
  CheckpointState state;
  std::string why;
  FirstError errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &state)) {
    why = absl::StrCat("it does not parse: ", errors.first());
  } else {
    why = Inconsistency(text, state);
  }
  if (!why.empty()) {
    // Never read as "no checkpoints": that would restart the job from step
    // 0 and overwrite what it had.
    return absl::DataLossError(absl::StrCat(
        "checkpoint state file ", path, " is damaged (", why,
        "); the checkpoints beside it are intact: `psctl ckpt list ", dir,
        "` shows them; restore one with `psctl ckpt restore`, or delete ", path,
        " to start the job from scratch"));
  }
  return state;
}

absl::StatusOr<CheckpointState> ReadCheckpointState(const std::string& dir) {
  const std::string path = JoinPath(dir, kStateFileName);
  // A state file lists a few names; anything this large is not one.
  constexpr int64_t kMaxStateFileBytes = 1 << 20;
  ASSIGN_OR_RETURN(std::string text,
                   ReadFileToString(path, kMaxStateFileBytes));
  return ParseCheckpointState(text, path, dir);
}

absl::Status WriteCheckpointState(const std::string& dir,
                                  const CheckpointState& state) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(state, &text);
  return WriteFileAtomically(JoinPath(dir, kStateFileName), text);
}

std::vector<std::string> AddCheckpoint(CheckpointState& state,
                                       const std::string& name,
                                       double timestamp,
                                       const RetentionPolicy& policy) {
  std::vector<std::string> names(state.all_model_checkpoint_paths().begin(),
                                 state.all_model_checkpoint_paths().end());
  std::vector<double> times(state.all_model_checkpoint_timestamps().begin(),
                            state.all_model_checkpoint_timestamps().end());
  // Saving a step again replaces its entry.
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      names.erase(names.begin() + i);
      times.erase(times.begin() + i);
      break;
    }
  }
  names.push_back(name);
  times.push_back(timestamp);
  if (state.last_preserved_timestamp() == 0 && names.size() == 1) {
    state.set_last_preserved_timestamp(timestamp);
  }
  std::vector<std::string> doomed;
  while (policy.max_to_keep >= 1 &&
         static_cast<int>(names.size()) > policy.max_to_keep) {
    const double hours = policy.keep_checkpoint_every_n_hours;
    if (hours > 0 &&
        times.front() - state.last_preserved_timestamp() >= hours * 3600) {
      state.set_last_preserved_timestamp(times.front());  // kept on disk
    } else {
      doomed.push_back(names.front());
    }
    names.erase(names.begin());
    times.erase(times.begin());
  }
  state.set_model_checkpoint_path(name);
  state.clear_all_model_checkpoint_paths();
  state.clear_all_model_checkpoint_timestamps();
  for (size_t i = 0; i < names.size(); ++i) {
    state.add_all_model_checkpoint_paths(names[i]);
    state.add_all_model_checkpoint_timestamps(times[i]);
  }
  return doomed;
}

absl::StatusOr<std::optional<std::string>> LatestCheckpoint(
    const std::string& dir) {
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir);
  if (absl::IsNotFound(state.status())) return std::optional<std::string>();
  if (!state.ok()) return state.status();
  if (state->model_checkpoint_path().empty()) {
    return std::optional<std::string>();
  }
  const std::string path = JoinPath(dir, state->model_checkpoint_path());
  if (!IsDirectory(path)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint state file in ", dir, " names ",
        state->model_checkpoint_path(),
        ", which is gone; restore another checkpoint (`psctl ckpt list ", dir,
        "`) or delete the state file to start afresh"));
  }
  return std::optional<std::string>(path);
}

absl::StatusOr<std::vector<std::string>> KeptCheckpointsNewestFirst(
    const std::string& dir) {
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir);
  if (absl::IsNotFound(state.status())) return std::vector<std::string>();
  if (!state.ok()) return state.status();
  std::vector<std::string> kept;
  const auto& listed = state->all_model_checkpoint_paths();
  for (auto name = listed.rbegin(); name != listed.rend(); ++name) {
    kept.push_back(*name);
  }
  return kept;
}

absl::StatusOr<std::vector<std::string>> SetAsideCheckpoints(
    const std::string& dir, const std::vector<std::string>& names) {
  ASSIGN_OR_RETURN(const CheckpointState old, ReadCheckpointState(dir));
  CheckpointState state = old;
  state.clear_all_model_checkpoint_paths();
  state.clear_all_model_checkpoint_timestamps();
  for (int i = 0; i < old.all_model_checkpoint_paths_size(); ++i) {
    const std::string& name = old.all_model_checkpoint_paths(i);
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    state.add_all_model_checkpoint_paths(name);
    state.add_all_model_checkpoint_timestamps(
        old.all_model_checkpoint_timestamps(i));
  }
  if (state.all_model_checkpoint_paths_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot set aside every checkpoint the state file in ",
                     dir, " lists; at least one must stay"));
  }
  state.set_model_checkpoint_path(state.all_model_checkpoint_paths(
      state.all_model_checkpoint_paths_size() - 1));
  // The state file first: it never names a directory that was moved.
  RETURN_IF_ERROR(WriteCheckpointState(dir, state));
  std::vector<std::string> moved;
  for (const std::string& name : names) {
    const std::string from = JoinPath(dir, name);
    if (!PathExists(from)) continue;
    std::string to = JoinPath(dir, absl::StrCat(name, ".damaged"));
    for (int n = 2; PathExists(to); ++n) {
      to = JoinPath(dir, absl::StrCat(name, ".damaged-", n));
    }
    RETURN_IF_ERROR(RenamePath(from, to));
    moved.push_back(to);
  }
  RETURN_IF_ERROR(SyncDirectory(dir));
  return moved;
}

}  // namespace psflow
