#include "common/job/placement_proto.h"

#include "absl/strings/str_cat.h"

namespace psflow {

void PlacementToProto(const Placement& placement, JobSpec& spec) {
  spec.clear_placement();
  for (const PlacedVariable& v : placement.variables) {
    VariablePlacementSpec* out = spec.add_placement();
    out->set_name(v.name);
    for (int64_t d : v.shape) out->add_shape(d);
    out->set_num_elements(v.num_elements);
    out->set_update(v.update == VariableUpdate::kMovingAverage
                        ? VariableSpec::MOVING_AVERAGE
                        : VariableSpec::OPTIMIZER);
    out->set_momentum(v.momentum);
    for (const VariablePart& p : v.parts) {
      VariablePartSpec* part = out->add_parts();
      part->set_ps(p.ps);
      part->set_name(p.name);
      for (int64_t d : p.shape) part->add_shape(d);
      part->set_row_begin(p.row_begin);
      part->set_row_end(p.row_end);
      part->set_element_offset(p.element_offset);
      part->set_num_elements(p.num_elements);
    }
  }
}

absl::StatusOr<Placement> PlacementFromProto(const JobSpec& spec, int num_ps) {
  Placement placement;
  placement.bytes_per_ps.assign(num_ps, 0);
  for (const EmbeddingTableSpec& table : spec.tables()) {
    placement.tables.push_back({table.name(), table.dim()});
  }
  for (const VariablePlacementSpec& in : spec.placement()) {
    PlacedVariable v;
    v.name = in.name();
    v.shape.assign(in.shape().begin(), in.shape().end());
    v.num_elements = in.num_elements();
    switch (in.update()) {
      case VariableSpec::OPTIMIZER:
        v.update = VariableUpdate::kOptimizer;
        break;
      case VariableSpec::MOVING_AVERAGE:
        v.update = VariableUpdate::kMovingAverage;
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "the job gives \"", in.name(), "\" update rule ", in.update(),
            ", which this task does not know; every task must run the same "
            "psflow release"));
    }
    v.momentum = in.momentum();
    int64_t covered = 0;
    for (const VariablePartSpec& p : in.parts()) {
      if (p.ps() < 0 || p.ps() >= num_ps) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the job places part \"", p.name(), "\" on ps ", p.ps(),
            " but this cluster has ", num_ps,
            " parameter servers; every task must use the same TF_CONFIG "
            "cluster"));
      }
      if (p.element_offset() != covered) {
        return absl::InvalidArgumentError(
            absl::StrCat("the parts of \"", in.name(), "\" do not tile it"));
      }
      covered += p.num_elements();
      VariablePart part;
      part.ps = p.ps();
      part.name = p.name();
      part.shape.assign(p.shape().begin(), p.shape().end());
      part.row_begin = p.row_begin();
      part.row_end = p.row_end();
      part.element_offset = p.element_offset();
      part.num_elements = p.num_elements();
      part.update = v.update;
      part.momentum = v.momentum;
      placement.bytes_per_ps[part.ps] += part.num_elements * 4;
      v.parts.push_back(std::move(part));
    }
    if (covered != v.num_elements) {
      return absl::InvalidArgumentError(
          absl::StrCat("the parts of \"", in.name(), "\" cover ", covered,
                       " of ", v.num_elements, " elements"));
    }
    placement.variables.push_back(std::move(v));
  }
  return placement;
}

}  // namespace psflow
