#include "checkpoint/checkpoint_manager.h"

#include <algorithm>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/index_file.h"
#include "checkpoint/paths.h"
#include "checkpoint/reader.h"
#include "checkpoint/shard_mapping.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/protocol.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<CheckpointManager>> CheckpointManager::Create(
    const CheckpointManagerOptions& options, ShardSet* client) {
  if (options.directory.empty() || options.directory[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint directory \"", options.directory, "\" is not absolute"));
  }
  RETURN_IF_ERROR(MakeDirectories(options.directory));
  ASSIGN_OR_RETURN(std::vector<std::string> entries,
                   ListDirectory(options.directory));
  for (const std::string& name : entries) {
    // ckpt.tmp-*: a save cut short; checkpoint.tmp-*: a state file
    // replacement cut short (WriteFileAtomically's temporary).
    if (!IsTemporaryCheckpointName(name) &&
        name.rfind(std::string(kStateFileName) + ".tmp-", 0) != 0) {
      continue;
    }
    LOG(INFO) << "removing " << name
              << ", an incomplete checkpoint left by an earlier run";
    absl::Status removed = RemoveRecursively(JoinPath(options.directory, name));
    if (!removed.ok()) LOG(WARNING) << removed.message();
  }
  return std::unique_ptr<CheckpointManager>(
      new CheckpointManager(options, client));
}

absl::StatusOr<SavedCheckpoint> CheckpointManager::Save() {
  const std::string temp =
      JoinPath(options_.directory, TemporaryCheckpointName());
  RETURN_IF_ERROR(MakeDirectories(temp));
  absl::StatusOr<SavedCheckpoint> saved = SaveInto(temp);
  if (!saved.ok()) {
    absl::Status removed = RemoveRecursively(temp);
    if (!removed.ok()) LOG(WARNING) << removed.message();
  }
  return saved;
}

absl::StatusOr<SavedCheckpoint> CheckpointManager::SaveInto(
    const std::string& temp) {
  const absl::Time start = absl::Now();
  const int num_ps = client_->num_shards();
  const bool sync = options_.mode == SYNC;
  int64_t sync_step = 0;
  HoldRequest hold;
  hold.set_protocol_version(kProtocolVersion);
  hold.set_lease_ms(absl::ToInt64Milliseconds(options_.hold_lease));
  if (sync) {
    hold.set_action(HoldRequest::FREEZE);
    absl::StatusOr<std::vector<HoldResponse>> frozen_or =
        client_->HoldAll(hold);
    if (!frozen_or.ok()) {
      // Some servers may have frozen: never leave them holding training.
      HoldRequest release;
      release.set_protocol_version(kProtocolVersion);
      release.set_action(HoldRequest::RELEASE);
      (void)client_->HoldAll(release);
      return frozen_or.status();
    }
    const std::vector<HoldResponse>& frozen = *frozen_or;
    for (const HoldResponse& r : frozen) {
      sync_step = std::max(sync_step, r.max_version());
    }
    hold.set_action(HoldRequest::HOLD_AT);
    hold.set_step(sync_step);
  }
  std::vector<std::string> files;
  std::vector<SaveShardRequest> requests(num_ps);
  for (int ps = 0; ps < num_ps; ++ps) {
    files.push_back(DataFileName(ps, num_ps));
    requests[ps].set_protocol_version(kProtocolVersion);
    requests[ps].set_path(JoinPath(temp, files.back()));
    requests[ps].set_sync_step(sync_step);
  }
  absl::StatusOr<std::vector<SaveShardResponse>> saved;
  if (sync) {
    absl::StatusOr<std::vector<HoldResponse>> held = client_->HoldAll(hold);
    saved = held.ok() ? client_->SaveShards(requests, options_.timeout)
                      : held.status();
    // Always lift the hold, whatever happened: training must go on.
    HoldRequest release;
    release.set_protocol_version(kProtocolVersion);
    release.set_action(HoldRequest::RELEASE);
    absl::StatusOr<std::vector<HoldResponse>> released =
        client_->HoldAll(release);
    if (!released.ok()) {
      LOG(WARNING) << "could not release the checkpoint hold: "
                   << released.status().message();
      if (saved.ok()) saved = released.status();
    }
  } else {
    saved = client_->SaveShards(requests, options_.timeout);
  }
  RETURN_IF_ERROR(saved.status());

  ASSIGN_OR_RETURN(CheckpointIndex index,
                   IndexFromSavedShards(client_->placement(), *saved, files));
  index.set_format_version(FormatVersionFor(index));
  index.set_global_step(sync ? sync_step : index.max_version());
  index.set_mode(options_.mode);
  index.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  index.set_job_name(options_.job_name);
  *index.mutable_optimizer() = options_.optimizer;
  if (options_.model.has_config()) *index.mutable_model() = options_.model;
  RETURN_IF_ERROR(ValidateIndex(index));
  RETURN_IF_ERROR(WriteIndexFile(JoinPath(temp, kIndexFileName), index));
  RETURN_IF_ERROR(SyncDirectory(temp));

  const std::string name = CheckpointName(index.global_step());
  const std::string final_path = JoinPath(options_.directory, name);
  absl::StatusOr<CheckpointState> state =
      ReadCheckpointState(options_.directory);
  if (absl::IsNotFound(state.status())) state = CheckpointState();
  RETURN_IF_ERROR(state.status());
  SavedCheckpoint result;
  result.path = final_path;
  result.step = index.global_step();
  for (const CheckpointFile& f : index.files()) result.bytes += f.size();
  if (PathExists(final_path)) {
    const auto& listed = state->all_model_checkpoint_paths();
    if (std::find(listed.begin(), listed.end(), name) != listed.end()) {
      // This step is saved already (no update since): keep that one, which
      // the state file names, rather than open a window without it.
      RETURN_IF_ERROR(RemoveRecursively(temp));
      result.elapsed = absl::Now() - start;
      return result;
    }
    // Left by a crash between the rename and the state file: unreferenced.
    RETURN_IF_ERROR(RemoveRecursively(final_path));
  }
  RETURN_IF_ERROR(RenamePath(temp, final_path));
  RETURN_IF_ERROR(SyncDirectory(options_.directory));

  const std::vector<std::string> doomed = AddCheckpoint(
      *state, name, absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()),
      options_.retention);
  RETURN_IF_ERROR(WriteCheckpointState(options_.directory, *state));
  for (const std::string& old : doomed) {
    absl::Status removed = RemoveRecursively(JoinPath(options_.directory, old));
    if (!removed.ok()) LOG(WARNING) << removed.message();
  }

  result.elapsed = absl::Now() - start;
  return result;
}

namespace {
constexpr char kPartlyRestoredPayloadUrl[] =
    "psflow/checkpoint/partly_restored";
}  // namespace

absl::StatusOr<int64_t> RestoreCheckpoint(const std::string& path,
                                          const OptimizerConfig& optimizer,
                                          ShardSet& client,
                                          absl::Duration timeout) {
  // Opening checks the index and every data file's size up front.
  ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                   CheckpointReader::Open(AbsolutePath(path)));
  const CheckpointIndex& index = reader->index();
  const bool same_optimizer =
      google::protobuf::util::MessageDifferencer::Equals(index.optimizer(),
                                                         optimizer);
  if (!same_optimizer) {
    LOG(WARNING) << "the checkpoint was written with another optimizer "
                    "configuration: restoring the variables' values only; "
                    "optimizer state (slots) restarts";
  }
  ASSIGN_OR_RETURN(
      std::vector<RestoreShardRequest> requests,
      PlanRestore(index, reader->path(), client.placement(), same_optimizer));
  // Two phases: a damaged file seen by one server changes no server.
  for (RestoreShardRequest& r : requests) {
    r.set_phase(RestoreShardRequest::PREPARE);
  }
  absl::Status prepared = client.RestoreShards(requests, timeout).status();
  std::vector<RestoreShardRequest> finish(requests.size());
  for (RestoreShardRequest& r : finish) {
    r.set_protocol_version(kProtocolVersion);
    r.set_phase(prepared.ok() ? RestoreShardRequest::COMMIT
                              : RestoreShardRequest::ABORT);
  }
  absl::Status finished = client.RestoreShards(finish, timeout).status();
  RETURN_IF_ERROR(prepared);
  if (!finished.ok()) return PartlyRestoredError(finished);
  return index.global_step();
}

absl::Status PartlyRestoredError(const absl::Status& commit_failure) {
  absl::Status partly(
      commit_failure.code(),
      absl::StrCat(commit_failure.message(),
                   " (after every server had checked its part: the "
                   "parameter servers may hold a partly restored model)"));
  partly.SetPayload(kPartlyRestoredPayloadUrl, absl::Cord("partly"));
  return partly;
}

bool IsPartlyRestored(const absl::Status& status) {
  return status.GetPayload(kPartlyRestoredPayloadUrl).has_value();
}

}  // namespace psflow
