#include "ps/table_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/job/row_placement.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "ps/checkpoint_files.h"
#include "ps/step_waits.h"

namespace psflow {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoint data files are little-endian");

// One segment being assembled: its rows' columns.
struct SegmentBuffer {
  std::vector<int64_t> ids, updates, last_steps;
  std::vector<float> values;              // rows x dim
  std::vector<std::vector<float>> slots;  // each rows x dim

  void Clear() {
    ids.clear();
    updates.clear();
    last_steps.clear();
    values.clear();
    for (auto& s : slots) s.clear();
  }
};

template <typename T>
absl::string_view AsBytes(const std::vector<T>& v) {
  return absl::string_view(reinterpret_cast<const char*>(v.data()),
                           v.size() * sizeof(T));
}

absl::Status FlushSegment(SegmentBuffer& segment, WritableFile& file,
                          SavedTable& saved) {
  if (segment.ids.empty()) return absl::OkStatus();
  const int64_t offset = file.size();
  uint32_t crc = 0;
  std::vector<absl::string_view> pieces = {
      AsBytes(segment.ids), AsBytes(segment.updates),
      AsBytes(segment.last_steps), AsBytes(segment.values)};
  for (const auto& s : segment.slots) pieces.push_back(AsBytes(s));
  for (absl::string_view piece : pieces) {
    crc = Crc32c(piece, crc);
    RETURN_IF_ERROR(file.Append(piece));
  }
  SavedRowSegment* out = saved.add_segments();
  out->set_file_offset(offset);
  out->set_num_rows(static_cast<int64_t>(segment.ids.size()));
  out->set_bytes(file.size() - offset);
  out->set_crc32c(crc);
  segment.Clear();
  return absl::OkStatus();
}

// Reads one segment whole into `buffer` and checks its size and CRC.
absl::Status ReadSegment(const RestoreTableTarget& target,
                         const RestoreRowSegment& segment,
                         CheckpointFiles& files, std::vector<char>& buffer) {
  ASSIGN_OR_RETURN(const RandomAccessFile* file, files.Get(segment.path()));
  if (segment.file_offset() > file->size() ||
      segment.bytes() > file->size() - segment.file_offset()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint file ", segment.path(), " is ", file->size(),
        " bytes, but rows of embedding table '", target.table(), "' should be ",
        segment.bytes(), " bytes at offset ", segment.file_offset(),
        "; the file is truncated or not this checkpoint's: restore another "
        "one"));
  }
  buffer.resize(segment.bytes());
  absl::Status read =
      file->Read(segment.file_offset(), segment.bytes(), buffer.data());
  if (!read.ok()) {
    return absl::DataLossError(absl::StrCat(
        "rows of embedding table '", target.table(), "' are missing: ",
        read.message(), "; the checkpoint is damaged: restore another one"));
  }
  const uint32_t crc = Crc32c(absl::string_view(buffer.data(), buffer.size()));
  if (crc != segment.crc32c()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint file ", segment.path(), ": the ", segment.bytes(),
        " bytes at offset ", segment.file_offset(),
        " (rows of embedding table '", target.table(),
        "') fail their CRC-32C check (stored ", segment.crc32c(), ", computed ",
        crc, "); the checkpoint is damaged: restore another one"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WaitForTablesAtStep(const std::vector<EmbeddingTable*>& tables,
                                 int64_t step, absl::Time deadline,
                                 const std::function<bool()>& cancelled) {
  std::vector<StepWait> waits;
  for (EmbeddingTable* table : tables) {
    waits.push_back(StepWait{[table, step](std::function<void()> ready) {
                               return table->WhenVersionReached(
                                   step, std::move(ready));
                             },
                             [table](uint64_t id) { table->CancelWait(id); }});
  }
  RETURN_IF_ERROR(
      AwaitStep(waits, step, "embedding table", deadline, cancelled));
  for (EmbeddingTable* table : tables) {
    if (table->Version() != step) {
      return absl::FailedPreconditionError(
          absl::StrCat("embedding table '", table->name(), "' is at step ",
                       table->Version(), ", not the checkpoint's step ", step,
                       "; updates were not held (HoldRequest HOLD_AT)"));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteTables(const std::vector<EmbeddingTable*>& tables,
                         int64_t sync_step, WritableFile& file,
                         SaveShardResponse& response) {
  for (EmbeddingTable* table : tables) {
    SavedTable& saved = *response.add_tables();
    saved.set_name(table->name());
    saved.set_dim(table->dim());
    for (const std::string& slot : table->slot_names()) saved.add_slots(slot);
    const int dim = table->dim();
    const size_t slots = table->slot_names().size();
    const int64_t rows_per_segment =
        RowsPerSegment(dim, static_cast<int>(slots));
    int64_t version = 0;
    for (int stripe = 0; stripe < EmbeddingTable::kStripes; ++stripe) {
      // A stripe's rows are copied under its lock, then written.
      std::vector<SegmentBuffer> copied(1);
      copied[0].slots.resize(slots);
      version = table->VisitStripe(stripe, [&](const SavedRow& row) {
        SegmentBuffer* b = &copied.back();
        if (static_cast<int64_t>(b->ids.size()) >= rows_per_segment) {
          copied.emplace_back();
          copied.back().slots.resize(slots);
          b = &copied.back();
        }
        b->ids.push_back(row.id);
        b->updates.push_back(row.updates);
        b->last_steps.push_back(row.last_step);
        b->values.insert(b->values.end(), row.data.begin(),
                         row.data.begin() + dim);
        for (size_t s = 0; s < slots; ++s) {
          b->slots[s].insert(b->slots[s].end(),
                             row.data.begin() + (s + 1) * dim,
                             row.data.begin() + (s + 2) * dim);
        }
      });
      for (SegmentBuffer& b : copied)
        RETURN_IF_ERROR(FlushSegment(b, file, saved));
    }
    if (sync_step > 0 && table->Version() != sync_step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "embedding table '", table->name(), "' moved to step ",
          table->Version(), " while step ", sync_step,
          " was being saved; updates were released during the save"));
    }
    saved.set_version(sync_step > 0 ? sync_step : version);
  }
  return absl::OkStatus();
}

absl::Status CheckTableTargets(const RestoreShardRequest& request,
                               const std::vector<EmbeddingTable*>& tables) {
  if (request.tables_size() == 0 && tables.empty()) return absl::OkStatus();
  if (request.num_ps() < 1 || request.ps_index() < 0 ||
      request.ps_index() >= request.num_ps()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "restore of embedding tables names server ", request.ps_index(), " of ",
        request.num_ps(), "; the chief must say which server this is"));
  }
  std::map<std::string, EmbeddingTable*> by_name;
  for (EmbeddingTable* t : tables) by_name[t->name()] = t;
  std::set<std::string> named;
  for (const RestoreTableTarget& target : request.tables()) {
    auto it = by_name.find(target.table());
    if (it == by_name.end()) {
      return absl::NotFoundError(
          absl::StrCat("restore names embedding table '", target.table(),
                       "', which is not on this parameter server"));
    }
    if (!named.insert(target.table()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore names embedding table '", target.table(), "' twice"));
    }
    if (target.dim() != it->second->dim()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "embedding table '", target.table(), "' was saved with dimension ",
          target.dim(), " but has ", it->second->dim(),
          " in this job; restore a checkpoint of the same model"));
    }
    if (target.slots_size() > 8) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore of embedding table '", target.table(), "' lists ",
          target.slots_size(), " slots; no optimizer has more than 2"));
    }
    const int64_t row_bytes = SavedRowBytes(target.dim(), target.slots_size());
    for (const RestoreRowSegment& s : target.segments()) {
      if (s.path().empty() || s.file_offset() < 0 || s.num_rows() < 1 ||
          s.num_rows() > std::max<int64_t>(1, kMaxSegmentBytes / row_bytes) ||
          s.bytes() != s.num_rows() * row_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "restore of embedding table '", target.table(), "': a segment of ",
            s.num_rows(), " rows claims ", s.bytes(), " bytes (", row_bytes,
            " per row expected); the checkpoint's index is damaged"));
      }
    }
  }
  for (EmbeddingTable* t : tables) {
    if (named.count(t->name()) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore leaves embedding table '", t->name(),
                       "' out; a restore overwrites every table"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CheckTableSources(
    const RestoreShardRequest& request,
    const std::vector<EmbeddingTable*>& tables) {
  std::map<std::string, EmbeddingTable*> by_name;
  for (EmbeddingTable* t : tables) by_name[t->name()] = t;
  CheckpointFiles files;
  std::vector<char> buffer;
  int64_t bytes = 0;
  // Every table is cleared and refilled, so the rows restored are all the
  // rows the budget then holds. Tables made together share one limit.
  int64_t needed = 0, limit = 0;
  for (const RestoreTableTarget& target : request.tables()) {
    const EmbeddingTable& table = *by_name.at(target.table());
    int64_t rows = 0;
    // Each id once (among the rows this server takes; the others check
    // theirs): a damaged checkpoint is refused, not half-merged.
    absl::flat_hash_set<int64_t> seen;
    for (const RestoreRowSegment& segment : target.segments()) {
      RETURN_IF_ERROR(ReadSegment(target, segment, files, buffer));
      bytes += segment.bytes();
      const int64_t* ids = reinterpret_cast<const int64_t*>(buffer.data());
      for (int64_t r = 0; r < segment.num_rows(); ++r) {
        const bool ours =
            RowServer(ids[r], request.num_ps()) == request.ps_index();
        if (ours && !seen.insert(ids[r]).second) {
          return absl::DataLossError(absl::StrCat(
              "checkpoint file ", segment.path(),
              ": the rows of embedding "
              "table '",
              target.table(), "' at offset ", segment.file_offset(),
              " hold id ", ids[r],
              " a second time; the checkpoint is damaged: restore another "
              "one"));
        }
        rows += ours;
      }
    }
    // A capped table evicts rather than fails past its cap.
    if (table.options().max_rows > 0) {
      rows = std::min(rows, table.options().max_rows);
    }
    needed += rows * table.bytes_per_row();
    if (table.memory_budget_limit() > 0) {
      limit = limit == 0 ? table.memory_budget_limit()
                         : std::min(limit, table.memory_budget_limit());
    }
  }
  if (limit > 0 && needed > limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the checkpoint's embedding rows for this parameter server need about ",
        needed, " bytes, and it has room for ", limit,
        " (--max_variable_bytes less its dense variables); nothing was "
        "restored: restore onto more parameter servers, or raise "
        "--max_variable_bytes"));
  }
  return bytes;
}

absl::Status ApplyTables(const RestoreShardRequest& request,
                         const std::vector<EmbeddingTable*>& tables) {
  std::map<std::string, EmbeddingTable*> by_name;
  for (EmbeddingTable* t : tables) by_name[t->name()] = t;
  CheckpointFiles files;
  std::vector<char> buffer;
  // Every table is emptied before any is refilled: the budget
  // CheckTableSources checked holds the restored rows alone, not one
  // table's new rows beside another's old ones.
  for (const RestoreTableTarget& target : request.tables()) {
    by_name.at(target.table())->Clear();
  }
  for (const RestoreTableTarget& target : request.tables()) {
    EmbeddingTable* table = by_name.at(target.table());
    const int dim = table->dim();
    // For each of the table's slots, where it is in a saved row (-1: not
    // saved; it starts at its initial value).
    const std::vector<std::string>& names = table->slot_names();
    std::vector<int> saved_slot(names.size(), -1);
    for (size_t s = 0; s < names.size() && !target.reset_slots(); ++s) {
      for (int k = 0; k < target.slots_size(); ++k) {
        if (target.slots(k) == names[s]) saved_slot[s] = k;
      }
    }
    std::vector<float> row(table->row_floats());
    for (const RestoreRowSegment& segment : target.segments()) {
      RETURN_IF_ERROR(ReadSegment(target, segment, files, buffer));
      const int64_t n = segment.num_rows();
      const char* p = buffer.data();
      const int64_t* ids = reinterpret_cast<const int64_t*>(p);
      const int64_t* updates = ids + n;
      const int64_t* last_steps = updates + n;
      const float* values = reinterpret_cast<const float*>(last_steps + n);
      for (int64_t r = 0; r < n; ++r) {
        if (RowServer(ids[r], request.num_ps()) != request.ps_index()) continue;
        std::memcpy(row.data(), values + r * dim, sizeof(float) * dim);
        for (size_t s = 0; s < names.size(); ++s) {
          float* out = row.data() + (s + 1) * dim;
          if (saved_slot[s] < 0) {
            std::fill_n(out, dim, table->slot_initial_value(s));
          } else {
            const float* slot = values + (saved_slot[s] + 1) * n * dim;
            std::memcpy(out, slot + r * dim, sizeof(float) * dim);
          }
        }
        SavedRow restored;
        restored.id = ids[r];
        restored.updates = updates[r];
        restored.last_step = last_steps[r];
        restored.data = row;
        absl::Status added = table->AddRestoredRow(restored);
        if (!added.ok()) {
          return absl::Status(
              added.code(),
              absl::StrCat(added.message(),
                           " (restoring onto more parameter servers, or "
                           "raising --max_variable_bytes, makes room)"));
        }
      }
    }
    table->SetRestoredVersion(request.global_step());
  }
  return absl::OkStatus();
}

}  // namespace psflow
