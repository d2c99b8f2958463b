#include "ps/shard_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/crc32c.h"
#include "common/fault_point.h"
#include "common/file_util.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "proto/protocol.h"
#include "ps/checkpoint_files.h"
#include "ps/step_waits.h"
#include "ps/table_checkpoint.h"

namespace psflow {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoint data files are little-endian float32");

absl::string_view Bytes(const float* data, int64_t n) {
  return absl::string_view(reinterpret_cast<const char*>(data),
                           static_cast<size_t>(n) * sizeof(float));
}

std::string TensorName(absl::string_view variable, absl::string_view slot) {
  return slot.empty() ? std::string(variable)
                      : absl::StrCat(variable, " (slot ", slot, ")");
}

// Waits until every chunk is at exactly `step`.
absl::Status WaitForStep(const std::vector<Variable*>& variables, int64_t step,
                         absl::Time deadline,
                         const std::function<bool()>& cancelled) {
  std::vector<StepWait> waits;
  for (Variable* v : variables) {
    for (int c = 0; c < v->num_chunks(); ++c) {
      waits.push_back(StepWait{[v, c, step](std::function<void()> ready) {
                                 return v->WhenVersionReached(c, step,
                                                              std::move(ready));
                               },
                               [v, c](uint64_t id) { v->CancelWait(c, id); }});
    }
  }
  RETURN_IF_ERROR(AwaitStep(waits, step, "chunk", deadline, cancelled));
  for (Variable* v : variables) {
    for (int c = 0; c < v->num_chunks(); ++c) {
      if (v->Version(c) != step) {
        return absl::FailedPreconditionError(absl::StrCat(
            "variable \"", v->name(), "\" chunk ", c, " is at step ",
            v->Version(c), ", not the checkpoint's step ", step,
            "; updates were not held (HoldRequest HOLD_AT)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status WriteShard(const std::vector<Variable*>& variables,
                        const std::vector<EmbeddingTable*>& tables,
                        int64_t sync_step, WritableFile& file,
                        SaveShardResponse& response) {
  int64_t largest_chunk = 1;
  for (Variable* v : variables) {
    largest_chunk = std::max(largest_chunk,
                             std::min(v->chunk_elements(), v->num_elements()));
  }
  std::vector<float> values(largest_chunk);
  std::vector<std::vector<float>> slot_buffers;
  for (Variable* v : variables) {
    for (int c = 0; c < v->num_chunks(); ++c) {
      const int64_t begin = c * v->chunk_elements();
      const int64_t size =
          std::min(v->chunk_elements(), v->num_elements() - begin);
      const auto& slot_names = v->slot_names();
      slot_buffers.resize(slot_names.size());
      std::vector<absl::Span<float>> slots;
      for (auto& buffer : slot_buffers) {
        buffer.resize(largest_chunk);
        slots.push_back(absl::MakeSpan(buffer.data(), size));
      }
      const int64_t version =
          v->Snapshot(c, absl::MakeSpan(values.data(), size), slots);
      if (sync_step > 0 && version != sync_step) {
        return absl::FailedPreconditionError(absl::StrCat(
            "variable \"", v->name(), "\" chunk ", c, " moved to step ",
            version, " while step ", sync_step,
            " was being saved; updates were released during the save"));
      }
      auto append = [&](const std::string& slot,
                        const float* data) -> absl::Status {
        absl::string_view bytes = Bytes(data, size);
        SavedSlice& slice = *response.add_slices();
        slice.set_variable(v->name());
        slice.set_slot(slot);
        slice.set_element_offset(begin);
        slice.set_num_elements(size);
        slice.set_file_offset(file.size());
        slice.set_crc32c(Crc32c(bytes));
        slice.set_version(version);
        return file.Append(bytes);
      };
      RETURN_IF_ERROR(append("", values.data()));
      for (size_t s = 0; s < slot_names.size(); ++s) {
        RETURN_IF_ERROR(append(slot_names[s], slot_buffers[s].data()));
      }
    }
  }
  // Tables after the dense slices (docs/checkpoint-format.md).
  RETURN_IF_ERROR(WriteTables(tables, sync_step, file, response));
  RETURN_IF_ERROR(file.Sync());
  response.set_file_bytes(file.size());
  return file.Close();
}

}  // namespace

absl::StatusOr<SaveShardResponse> SaveShard(
    ParameterServerCore& core, const SaveShardRequest& request,
    absl::Time deadline, std::function<bool()> cancelled,
    const PathConfinement* confinement) {
  if (request.protocol_version() != kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SaveShard with protocol version ", request.protocol_version(),
        "; this server speaks ", kProtocolVersion));
  }
  if (request.path().empty() || request.path()[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "SaveShard path \"", request.path(), "\" is not an absolute path"));
  }
  std::string path = request.path();
  if (confinement != nullptr) {
    ASSIGN_OR_RETURN(path, confinement->Check(path, /*exists=*/false));
  }
  ASSIGN_OR_RETURN(std::vector<Variable*> variables, core.ListVariables());
  ASSIGN_OR_RETURN(std::vector<EmbeddingTable*> tables, core.ListTables());
  if (request.sync_step() > 0) {
    if (!core.sync()) {
      return absl::InvalidArgumentError(
          "SaveShard.sync_step is for sync mode; this server is async");
    }
    RETURN_IF_ERROR(
        WaitForStep(variables, request.sync_step(), deadline, cancelled));
    RETURN_IF_ERROR(
        WaitForTablesAtStep(tables, request.sync_step(), deadline, cancelled));
  }
  absl::StatusOr<WritableFile> file = WritableFile::CreateNew(path);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("cannot save this parameter server's "
                                     "variables: ",
                                     file.status().message(),
                                     " (is the checkpoint directory on "
                                     "storage every task can reach?)"));
  }
  // Tests kill or stop a server here, its data file begun.
  FaultPoint("ps.save_shard");
  SaveShardResponse response;
  absl::Status written =
      WriteShard(variables, tables, request.sync_step(), *file, response);
  if (!written.ok()) {
    (void)file->Close();
    unlink(path.c_str());
    return written;
  }
  return response;
}

namespace {

// A restore read and checked (PREPARE), waiting for its COMMIT. The data
// is not kept: COMMIT reads it again, from the page cache when it still
// holds it, checking every CRC again, so a restore never needs memory for
// a second copy of the shard.
struct PreparedRestore {
  RestoreShardRequest request;
};

// Reads one source's whole slice into `out` (num_elements floats) and
// checks its CRC.
absl::Status ReadSlice(const RestoreSource& source, const RestoreTarget& target,
                       CheckpointFiles& files, float* out) {
  ASSIGN_OR_RETURN(const RandomAccessFile* file, files.Get(source.path()));
  const int64_t bytes = source.num_elements() * int64_t{sizeof(float)};
  absl::Status read =
      file->Read(source.file_offset(), bytes, reinterpret_cast<char*>(out));
  if (!read.ok()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint data for ", TensorName(target.variable(), target.slot()),
        " is missing: ", read.message(),
        "; the checkpoint is damaged: restore another one"));
  }
  const uint32_t crc = Crc32c(Bytes(out, source.num_elements()));
  if (crc != source.crc32c()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint file ", source.path(), ": the ", bytes, " bytes at offset ",
        source.file_offset(), " (",
        TensorName(target.variable(), target.slot()), ") fail their CRC-32C ",
        "check (stored ", source.crc32c(), ", computed ", crc,
        "); the checkpoint is damaged: restore another one"));
  }
  return absl::OkStatus();
}

// Reads and checks every slice once, in file order: a server's data file
// interleaves each chunk's values and slots, so reading tensor by tensor
// would stride through it and defeat the kernel's readahead.
absl::StatusOr<int64_t> CheckAllSources(const RestoreShardRequest& request) {
  struct Read {
    const RestoreSource* source;
    const RestoreTarget* target;
  };
  std::vector<Read> reads;
  for (const RestoreTarget& target : request.targets()) {
    for (const RestoreSource& source : target.sources()) {
      reads.push_back({&source, &target});
    }
  }
  std::stable_sort(
      reads.begin(), reads.end(), [](const Read& a, const Read& b) {
        const int order = a.source->path().compare(b.source->path());
        if (order != 0) return order < 0;
        return a.source->file_offset() < b.source->file_offset();
      });
  CheckpointFiles files;
  // Let the kernel read every file ahead while slices are checked.
  for (const Read& read : reads) {
    ASSIGN_OR_RETURN(const RandomAccessFile* file,
                     files.Get(read.source->path()));
    file->WillReadSequentially();
    // Before any buffer is sized by the request: the slice must lie within
    // the file that holds it.
    const int64_t bytes = read.source->num_elements() * int64_t{sizeof(float)};
    if (read.source->file_offset() > file->size() ||
        bytes > file->size() - read.source->file_offset()) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint file ", read.source->path(), " is ", file->size(),
          " bytes, but ",
          TensorName(read.target->variable(), read.target->slot()),
          " should be ", bytes, " bytes at offset ", read.source->file_offset(),
          "; the file is truncated or not this checkpoint's: restore another "
          "one"));
    }
  }
  // A slice shared by two targets' ranges is checked once.
  std::vector<Read> unique;
  int64_t bytes = 0;
  for (const Read& read : reads) {
    if (!unique.empty() &&
        unique.back().source->path() == read.source->path() &&
        unique.back().source->file_offset() == read.source->file_offset()) {
      continue;
    }
    unique.push_back(read);
    bytes += read.source->num_elements() * int64_t{sizeof(float)};
  }
  // Contiguous runs of the file order on a few threads, so that reading and
  // CRC-32C overlap (each run still reads front to back). Every file is
  // open already: the threads only look files up.
  const int threads = static_cast<int>(
      std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 4));
  std::vector<size_t> starts = {0};
  int64_t so_far = 0;
  for (size_t i = 0; i < unique.size(); ++i) {
    so_far += unique[i].source->num_elements() * int64_t{sizeof(float)};
    if (static_cast<int>(starts.size()) < threads &&
        so_far * threads >= bytes * static_cast<int64_t>(starts.size())) {
      starts.push_back(i + 1);
    }
  }
  starts.push_back(unique.size());
  std::vector<absl::Status> results(starts.size() - 1);
  std::vector<std::thread> workers;
  for (size_t t = 0; t + 1 < starts.size(); ++t) {
    workers.emplace_back([&, t] {
      std::vector<float> buffer;
      for (size_t i = starts[t]; i < starts[t + 1] && results[t].ok(); ++i) {
        buffer.resize(unique[i].source->num_elements());
        results[t] = ReadSlice(*unique[i].source, *unique[i].target, files,
                               buffer.data());
      }
    });
  }
  for (std::thread& w : workers) w.join();
  for (const absl::Status& result : results) RETURN_IF_ERROR(result);
  return bytes;
}

// Overwrites every variable from `request`'s sources, chunk by chunk (each
// chunk's values and slots set together under its lock), re-checking every
// slice it reads.
absl::Status Apply(
    const RestoreShardRequest& request,
    const std::map<std::string, Variable*, std::less<>>& by_name) {
  // variable -> (slot index or -1 for values) -> target
  std::map<Variable*, std::map<int, const RestoreTarget*>> plan;
  for (const RestoreTarget& target : request.targets()) {
    Variable* v = by_name.at(target.variable());
    int slot = -1;
    if (!target.slot().empty()) {
      const auto& names = v->slot_names();
      slot = static_cast<int>(
          std::find(names.begin(), names.end(), target.slot()) - names.begin());
    }
    plan[v][slot] = &target;
  }
  CheckpointFiles files;
  std::vector<float> temp;
  for (auto& planned : plan) {
    Variable* const v = planned.first;
    const auto& tensors = planned.second;  // a lambda below captures it
    for (int c = 0; c < v->num_chunks(); ++c) {
      const int64_t begin = c * v->chunk_elements();
      // Reads straight into the variable's memory, under the chunk's lock.
      auto fill = [&](absl::Span<float> values,
                      const std::vector<absl::Span<float>>& slots,
                      std::vector<bool>& filled) -> absl::Status {
        const int64_t size = static_cast<int64_t>(values.size());
        for (const auto& [slot, target] : tensors) {
          float* out = slot < 0 ? values.data() : slots[slot].data();
          if (slot >= 0) filled[slot] = true;
          for (const RestoreSource& source : target->sources()) {
            const int64_t lo = std::max(begin, source.slice_begin());
            const int64_t hi = std::min(
                begin + size, source.slice_begin() + source.num_elements());
            if (lo >= hi) continue;
            if (lo == source.slice_begin() &&
                hi == source.slice_begin() + source.num_elements()) {
              // The whole slice lies in this chunk: read it in place.
              RETURN_IF_ERROR(
                  ReadSlice(source, *target, files, out + (lo - begin)));
            } else {
              temp.resize(source.num_elements());
              RETURN_IF_ERROR(ReadSlice(source, *target, files, temp.data()));
              std::copy(temp.begin() + (lo - source.slice_begin()),
                        temp.begin() + (hi - source.slice_begin()),
                        out + (lo - begin));
            }
          }
        }
        return absl::OkStatus();
      };
      RETURN_IF_ERROR(v->RestoreInPlace(c, request.global_step(), fill));
    }
  }
  return absl::OkStatus();
}

// Checks that the sources' overlaps with [0, n) tile it exactly.
absl::Status CheckCoverage(const RestoreTarget& target, int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const RestoreSource& s : target.sources()) {
    if (s.num_elements() <= 0 || s.file_offset() < 0 || s.path().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore of ", TensorName(target.variable(), target.slot()),
          ": a source has no elements, a negative offset or no path"));
    }
    // Keeps slice_begin + num_elements and byte counts from overflowing;
    // what a source may make the server read is bounded by its file's real
    // size (CheckAllSources).
    constexpr int64_t kMaxSlice = int64_t{1} << 40;
    if (s.num_elements() > kMaxSlice || s.slice_begin() < -kMaxSlice ||
        s.slice_begin() > kMaxSlice) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore of ", TensorName(target.variable(), target.slot()),
          ": a source slice [", s.slice_begin(), ", +", s.num_elements(),
          ") is beyond any variable's size; the checkpoint's index is "
          "damaged"));
    }
    const int64_t lo = std::max<int64_t>(0, s.slice_begin());
    const int64_t hi = std::min(n, s.slice_begin() + s.num_elements());
    if (lo < hi) ranges.emplace_back(lo, hi);
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t covered = 0;
  for (const auto& [lo, hi] : ranges) {
    if (lo != covered) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore of ", TensorName(target.variable(), target.slot()),
          ": the sources ", lo < covered ? "overlap" : "leave a gap",
          " at element ", std::min(lo, covered)));
    }
    covered = hi;
  }
  if (covered != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "restore of ", TensorName(target.variable(), target.slot()),
        ": the sources cover ", covered, " of ", n, " elements"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RestoreShardResponse> RestoreShard(
    ParameterServerCore& core, const RestoreShardRequest& request,
    const PathConfinement* confinement) {
  if (request.protocol_version() != kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RestoreShard with protocol version ", request.protocol_version(),
        "; this server speaks ", kProtocolVersion));
  }
  if (confinement != nullptr) {
    // Every file, before any is opened (also for COMMIT: a request is
    // never trusted for having passed an earlier phase).
    for (const RestoreTarget& target : request.targets()) {
      for (const RestoreSource& source : target.sources()) {
        RETURN_IF_ERROR(
            confinement->Check(source.path(), /*exists=*/true).status());
      }
    }
    for (const RestoreTableTarget& table : request.tables()) {
      for (const RestoreRowSegment& segment : table.segments()) {
        RETURN_IF_ERROR(
            confinement->Check(segment.path(), /*exists=*/true).status());
      }
    }
  }
  ASSIGN_OR_RETURN(std::vector<Variable*> variables, core.ListVariables());
  ASSIGN_OR_RETURN(std::vector<EmbeddingTable*> tables, core.ListTables());
  std::map<std::string, Variable*, std::less<>> by_name;
  for (Variable* v : variables) by_name[v->name()] = v;
  switch (request.phase()) {
    case RestoreShardRequest::PREPARE_AND_COMMIT:
    case RestoreShardRequest::PREPARE:
      core.TakeStashedRestore();  // a new restore replaces an unfinished one
      break;
    case RestoreShardRequest::COMMIT: {
      std::shared_ptr<void> stashed = core.TakeStashedRestore();
      if (stashed == nullptr) {
        return absl::FailedPreconditionError(
            "RestoreShard COMMIT without a PREPARE on this server (it may "
            "have restarted in between); restore again");
      }
      const auto& prepared =
          std::static_pointer_cast<PreparedRestore>(stashed)->request;
      absl::Status applied = Apply(prepared, by_name);
      if (applied.ok()) applied = ApplyTables(prepared, tables);
      if (applied.code() == absl::StatusCode::kResourceExhausted) {
        return applied;  // no room for the rows: not damage
      }
      if (!applied.ok()) {
        // Checked a moment ago: the files changed under us. Some variables
        // may hold restored values now; say so plainly.
        return absl::DataLossError(absl::StrCat(
            applied.message(),
            " (the data files changed between the check and the commit; "
            "this server's variables are partly restored: restore again)"));
      }
      return RestoreShardResponse();
    }
    case RestoreShardRequest::ABORT:
      core.TakeStashedRestore();
      return RestoreShardResponse();
    default:
      return absl::InvalidArgumentError("unknown RestoreShard phase");
  }
  if (request.global_step() < 0) {
    return absl::InvalidArgumentError("RestoreShard.global_step is negative");
  }

  // Validate the whole request before reading anything.
  std::set<std::pair<std::string, std::string>> named;
  for (const RestoreTarget& target : request.targets()) {
    auto it = by_name.find(target.variable());
    if (it == by_name.end()) {
      return absl::NotFoundError(
          absl::StrCat("restore names variable \"", target.variable(),
                       "\", which is not on this parameter server"));
    }
    Variable* v = it->second;
    if (!target.slot().empty()) {
      const auto& names = v->slot_names();
      if (std::find(names.begin(), names.end(), target.slot()) == names.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("restore names slot \"", target.slot(), "\" of \"",
                         v->name(), "\", which ",
                         v->update() == VariableUpdate::kMovingAverage
                             ? "a moving-average variable (no optimizer slots)"
                             : "this server's optimizer",
                         " does not have"));
      }
    }
    if (!named.emplace(v->name(), target.slot()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore names ", TensorName(v->name(), target.slot()), " twice"));
    }
    RETURN_IF_ERROR(CheckCoverage(target, v->num_elements()));
  }
  for (Variable* v : variables) {
    if (named.count({v->name(), ""}) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore leaves variable \"", v->name(),
                       "\" out; a restore overwrites every variable"));
    }
  }

  RETURN_IF_ERROR(CheckTableTargets(request, tables));

  // Check everything before anything changes.
  RestoreShardResponse response;
  ASSIGN_OR_RETURN(int64_t bytes, CheckAllSources(request));
  ASSIGN_OR_RETURN(int64_t table_bytes, CheckTableSources(request, tables));
  response.set_bytes_read(bytes + table_bytes);
  if (request.phase() == RestoreShardRequest::PREPARE) {
    auto prepared = std::make_shared<PreparedRestore>();
    prepared->request = request;
    core.StashRestore(std::move(prepared));
    return response;
  }
  absl::Status applied = Apply(request, by_name);
  if (applied.ok()) applied = ApplyTables(request, tables);
  if (!applied.ok()) {
    if (applied.code() == absl::StatusCode::kResourceExhausted) return applied;
    return absl::DataLossError(absl::StrCat(
        applied.message(),
        " (the data files changed during the restore; this server's "
        "variables are partly restored: restore again)"));
  }
  return response;
}

}  // namespace psflow
