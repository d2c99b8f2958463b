#include "common/job/placement.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow {

const PlacedVariable* Placement::Find(const std::string& name) const {
  for (const PlacedVariable& v : variables) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

absl::StatusOr<Placement> PlaceVariables(
    const std::vector<LogicalVariable>& variables, int num_ps,
    int64_t split_threshold_bytes) {
  if (num_ps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement needs at least one parameter server, got ", num_ps));
  }
  Placement placement;
  placement.bytes_per_ps.assign(num_ps, 0);
  std::set<std::string> names;
  for (const LogicalVariable& v : variables) {
    if (v.name.empty()) {
      return absl::InvalidArgumentError("a variable has an empty name");
    }
    if (!names.insert(v.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", v.name, "\" is defined twice"));
    }
    PlacedVariable placed;
    placed.name = v.name;
    placed.shape = v.shape;
    placed.update = v.update;
    placed.momentum = v.momentum;
    placed.num_elements = 1;
    for (int64_t d : v.shape) {
      if (d <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("variable \"", v.name, "\" has shape [",
                         absl::StrJoin(v.shape, ", "),
                         "]; every dimension must be positive"));
      }
      placed.num_elements *= d;
    }
    placement.variables.push_back(std::move(placed));
  }

  // Largest first; the input order breaks ties so the result is stable.
  std::vector<size_t> order(placement.variables.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return placement.variables[a].num_elements >
           placement.variables[b].num_elements;
  });

  for (size_t index : order) {
    PlacedVariable& v = placement.variables[index];
    const int64_t bytes = v.num_elements * static_cast<int64_t>(sizeof(float));
    const int64_t rows = v.shape.empty() ? 1 : v.shape[0];
    const int64_t row_elements = rows == 0 ? 0 : v.num_elements / rows;
    const int parts = (num_ps > 1 && bytes >= split_threshold_bytes)
                          ? static_cast<int>(std::min<int64_t>(num_ps, rows))
                          : 1;
    int64_t row = 0;
    for (int p = 0; p < parts; ++p) {
      // Even split; the first (rows % parts) parts take one extra row.
      const int64_t count = rows / parts + (p < rows % parts ? 1 : 0);
      VariablePart part;
      if (parts == 1) {
        part.ps =
            static_cast<int>(std::min_element(placement.bytes_per_ps.begin(),
                                              placement.bytes_per_ps.end()) -
                             placement.bytes_per_ps.begin());
        part.name = v.name;
      } else {
        part.ps = p;
        part.name = absl::StrCat(v.name, "/part_", p);
      }
      part.row_begin = row;
      part.row_end = row + count;
      part.shape = v.shape;
      if (!part.shape.empty()) part.shape[0] = count;
      part.element_offset = row * row_elements;
      part.num_elements = count * row_elements;
      part.update = v.update;
      part.momentum = v.momentum;
      placement.bytes_per_ps[part.ps] +=
          part.num_elements * static_cast<int64_t>(sizeof(float));
      v.parts.push_back(std::move(part));
      row += count;
    }
  }
  return placement;
}

}  // namespace psflow
