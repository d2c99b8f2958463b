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
  if (!problems.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoint does not fit this model: ",
                     absl::StrJoin(problems, "; "),
                     " (was it written by another model configuration?)"));
  }
  std::vector<RestoreShardRequest> requests(placement.bytes_per_ps.size());
  for (RestoreShardRequest& r : requests) {
    r.set_protocol_version(kProtocolVersion);
    r.set_global_step(index.global_step());
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
