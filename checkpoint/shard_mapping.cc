#include "checkpoint/shard_mapping.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/paths.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

absl::StatusOr<CheckpointIndex> IndexFromSavedShards(
    const Placement& placement, const std::vector<SaveShardResponse>& saved,
    const std::vector<std::string>& file_names) {
  // (ps, part name) -> (logical variable, element offset of the part).
  std::map<std::pair<int, std::string>,
           std::pair<const PlacedVariable*, int64_t>>
      parts;
  for (const PlacedVariable& v : placement.variables) {
    for (const VariablePart& p : v.parts) {
      parts[{p.ps, p.name}] = {&v, p.element_offset};
    }
  }
  CheckpointIndex index;
  index.set_num_ps(static_cast<int>(saved.size()));
  // (logical name, slot) -> tensor.
  std::map<std::pair<std::string, std::string>, CheckpointTensor> tensors;
  int64_t min_version = INT64_MAX, max_version = 0;
  for (size_t ps = 0; ps < saved.size(); ++ps) {
    CheckpointFile* file = index.add_files();
    file->set_name(file_names[ps]);
    file->set_size(saved[ps].file_bytes());
    file->set_ps(static_cast<int>(ps));
    for (const SavedSlice& s : saved[ps].slices()) {
      auto part = parts.find({static_cast<int>(ps), s.variable()});
      if (part == parts.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "ps-", ps, " saved variable \"", s.variable(),
            "\", which the placement does not put there; was the server "
            "restarted with another job?"));
      }
      const PlacedVariable& v = *part->second.first;
      CheckpointTensor& t = tensors[{v.name, s.slot()}];
      if (t.name().empty()) {
        t.set_name(v.name);
        t.set_slot(s.slot());
        t.set_dtype("float32");
        for (int64_t d : v.shape) t.add_shape(d);
      }
      CheckpointSlice* slice = t.add_slices();
      slice->set_element_offset(part->second.second + s.element_offset());
      slice->set_num_elements(s.num_elements());
      slice->set_file(file_names[ps]);
      slice->set_file_offset(s.file_offset());
      slice->set_crc32c(s.crc32c());
      slice->set_version(s.version());
      min_version = std::min(min_version, s.version());
      max_version = std::max(max_version, s.version());
    }
  }
  // Model order, values before slots; slices by offset.
  for (const PlacedVariable& v : placement.variables) {
    for (auto it = tensors.lower_bound({v.name, ""});
         it != tensors.end() && it->first.first == v.name; ++it) {
      CheckpointTensor& t = *index.add_tensors();
      t = std::move(it->second);
      std::sort(t.mutable_slices()->begin(), t.mutable_slices()->end(),
                [](const CheckpointSlice& a, const CheckpointSlice& b) {
                  return a.element_offset() < b.element_offset();
                });
    }
  }
  // Tables: every server saved its rows of each; the index lists each
  // table once with every server's segments.
  std::map<std::string, CheckpointTable> tables;
  for (size_t ps = 0; ps < saved.size(); ++ps) {
    for (const SavedTable& s : saved[ps].tables()) {
      const bool placed =
          std::any_of(placement.tables.begin(), placement.tables.end(),
                      [&](const PlacedTable& t) { return t.name == s.name(); });
      if (!placed) {
        return absl::FailedPreconditionError(absl::StrCat(
            "ps-", ps, " saved embedding table '", s.name(),
            "', which this job does not have; was the server restarted "
            "with another job?"));
      }
      CheckpointTable& t = tables[s.name()];
      if (t.name().empty()) {
        t.set_name(s.name());
        t.set_dim(s.dim());
        *t.mutable_slots() = s.slots();
        t.set_min_version(s.version());
        t.set_max_version(s.version());
      } else if (t.dim() != s.dim() ||
                 !std::equal(t.slots().begin(), t.slots().end(),
                             s.slots().begin(), s.slots().end())) {
        return absl::FailedPreconditionError(
            absl::StrCat("the servers saved embedding table '", s.name(),
                         "' with different dimensions or optimizer slots"));
      }
      t.set_min_version(std::min(t.min_version(), s.version()));
      t.set_max_version(std::max(t.max_version(), s.version()));
      min_version = std::min(min_version, s.version());
      max_version = std::max(max_version, s.version());
      for (const SavedRowSegment& segment : s.segments()) {
        CheckpointRowSegment* out = t.add_segments();
        out->set_file(file_names[ps]);
        out->set_file_offset(segment.file_offset());
        out->set_num_rows(segment.num_rows());
        out->set_bytes(segment.bytes());
        out->set_crc32c(segment.crc32c());
        t.set_num_rows(t.num_rows() + segment.num_rows());
      }
    }
  }
  for (const PlacedTable& placed : placement.tables) {
    auto it = tables.find(placed.name);
    if (it == tables.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no server saved embedding table '", placed.name,
                       "'; were the servers restarted without it?"));
    }
    *index.add_tables() = std::move(it->second);
  }
  index.set_min_version(min_version == INT64_MAX ? 0 : min_version);
  index.set_max_version(max_version);
  return index;
}

absl::StatusOr<std::vector<RestoreShardRequest>> PlanRestore(
    const CheckpointIndex& index, const std::string& checkpoint_dir,
    const Placement& placement, bool restore_slots) {
  std::map<std::string, std::vector<const CheckpointTensor*>> by_name;
  for (const CheckpointTensor& t : index.tensors()) {
    by_name[t.name()].push_back(&t);
  }
  std::vector<std::string> problems;
  std::set<std::string> placed;
  for (const PlacedVariable& v : placement.variables) {
    placed.insert(v.name);
    auto it = by_name.find(v.name);
    if (it == by_name.end()) {
      problems.push_back(absl::StrCat("\"", v.name, "\" is not in it"));
      continue;
    }
    const CheckpointTensor* values_tensor = nullptr;
    for (const CheckpointTensor* t : it->second) {
      if (t->slot().empty()) values_tensor = t;
    }
    if (values_tensor == nullptr) {
      problems.push_back(
          absl::StrCat("\"", v.name, "\" has optimizer slots but no values"));
      continue;
    }
    const CheckpointTensor& values = *values_tensor;
    std::vector<int64_t> shape(values.shape().begin(), values.shape().end());
    if (shape != v.shape) {
      problems.push_back(absl::StrCat("\"", v.name, "\" is ",
                                      ShapeString(shape), " there but ",
                                      ShapeString(v.shape), " in the model"));
    }
  }
  for (const auto& [name, tensors] : by_name) {
    if (placed.count(name) == 0) {
      problems.push_back(
          absl::StrCat("it holds \"", name, "\", which the model lacks"));
    }
  }
  std::map<std::string, const CheckpointTable*> saved_tables;
  for (const CheckpointTable& t : index.tables()) saved_tables[t.name()] = &t;
  for (const PlacedTable& t : placement.tables) {
    auto it = saved_tables.find(t.name);
    if (it == saved_tables.end()) {
      problems.push_back(
          absl::StrCat("embedding table '", t.name, "' is not in it"));
    } else if (it->second->dim() != t.dim) {
      problems.push_back(absl::StrCat("embedding table '", t.name,
                                      "' has dimension ", it->second->dim(),
                                      " there but ", t.dim, " in the model"));
    }
  }
  for (const auto& [name, table] : saved_tables) {
    const bool placed_table = std::any_of(
        placement.tables.begin(), placement.tables.end(),
        [&name = name](const PlacedTable& t) { return t.name == name; });
    if (!placed_table) {
      problems.push_back(absl::StrCat("it holds embedding table '", name,
                                      "', which the model lacks"));
    }
  }
  if (!problems.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoint does not fit this model: ",
                     absl::StrJoin(problems, "; "),
                     " (was it written by another model configuration?)"));
  }
  std::vector<RestoreShardRequest> requests(placement.bytes_per_ps.size());
  for (size_t ps = 0; ps < requests.size(); ++ps) {
    RestoreShardRequest& r = requests[ps];
    r.set_protocol_version(kProtocolVersion);
    r.set_global_step(index.global_step());
    r.set_ps_index(static_cast<int>(ps));
    r.set_num_ps(static_cast<int>(requests.size()));
    // Every server reads every segment and keeps the rows it now owns.
    for (const PlacedTable& t : placement.tables) {
      const CheckpointTable& saved = *saved_tables[t.name];
      RestoreTableTarget* target = r.add_tables();
      target->set_table(t.name);
      target->set_dim(saved.dim());
      *target->mutable_slots() = saved.slots();
      target->set_reset_slots(!restore_slots);
      for (const CheckpointRowSegment& s : saved.segments()) {
        RestoreRowSegment* segment = target->add_segments();
        segment->set_path(JoinPath(checkpoint_dir, s.file()));
        segment->set_file_offset(s.file_offset());
        segment->set_num_rows(s.num_rows());
        segment->set_bytes(s.bytes());
        segment->set_crc32c(s.crc32c());
      }
    }
  }
  for (const PlacedVariable& v : placement.variables) {
    for (const CheckpointTensor* t : by_name[v.name]) {
      // A moving average keeps no slots, even when the checkpoint has some
      // (the model decides the update rule, not the checkpoint).
      if (!t->slot().empty() &&
          (!restore_slots || v.update == VariableUpdate::kMovingAverage)) {
        continue;
      }
      for (const VariablePart& part : v.parts) {
        RestoreTarget& target = *requests[part.ps].add_targets();
        target.set_variable(part.name);
        target.set_slot(t->slot());
        const int64_t lo = part.element_offset;
        const int64_t hi = lo + part.num_elements;
        for (const CheckpointSlice& s : t->slices()) {
          if (s.element_offset() + s.num_elements() <= lo ||
              s.element_offset() >= hi) {
            continue;
          }
          RestoreSource& source = *target.add_sources();
          source.set_path(JoinPath(checkpoint_dir, s.file()));
          source.set_file_offset(s.file_offset());
          source.set_num_elements(s.num_elements());
          source.set_crc32c(s.crc32c());
          source.set_slice_begin(s.element_offset() - lo);
        }
      }
    }
  }
  return requests;
}

}  // namespace psflow
