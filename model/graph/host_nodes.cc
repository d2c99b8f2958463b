#include "model/graph/host_nodes.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

bool Categorical(const GraphSpec& spec, int value) {
  return value < static_cast<int>(spec.inputs.size()) &&
         spec.inputs[value].kind == GraphInput::Kind::kCategorical;
}

// One categorical input's view of a batch's sparse features.
struct Bags {
  Bags(const GraphSpec& spec, const SparseBatch& sparse, int value) {
    const GraphInput& input = spec.inputs[value];
    offsets = sparse.offsets.data();
    num_fields = sparse.num_fields;
    field = input.field;
    dim = spec.tables[input.table].dim();
    mean = input.pooling == Pooling::kMean;
    rows = sparse.rows[input.table].data();
    if (input.table < static_cast<int>(sparse.row_gradients.size())) {
      row_gradients = sparse.row_gradients[input.table].data();
    }
    // table_slots[t], or (a batch that gives every table every id) slots.
    slots = sparse.table_slots.empty() ? sparse.slots.data()
                                       : sparse.table_slots[input.table].data();
  }

  const int64_t* offsets;
  int num_fields, field, dim;
  bool mean;
  const float* rows;
  float* row_gradients = nullptr;
  const int32_t* slots;
};

// Example i's bag pooled into y[0, dim): overwriting y, or added to it.
// False when an id has no row (slot -1).
inline bool Pool(const Bags& b, int64_t i, bool add, float* y) {
  const int64_t at = i * b.num_fields + b.field;
  const int64_t begin = b.offsets[at], end = b.offsets[at + 1];
  const int dim = b.dim;
  if (end == begin + 1) {  // one id (every Criteo field): its row
    if (b.slots[begin] < 0) return false;
    const float* row = b.rows + int64_t{b.slots[begin]} * dim;
    if (add) {
      for (int j = 0; j < dim; ++j) y[j] += row[j];
    } else {  // a loop, not memcpy: rows are a few floats
      for (int j = 0; j < dim; ++j) y[j] = row[j];
    }
    return true;
  }
  if (!add) std::fill(y, y + dim, 0.0f);
  if (end == begin) return true;  // an empty bag pools to zeros
  // The bag's sum apart from y (mean pooling scales this bag alone).
  const float scale = b.mean ? 1.0f / static_cast<float>(end - begin) : 1.0f;
  float sum[64];
  for (int j0 = 0; j0 < dim; j0 += 64) {
    const int width = std::min(64, dim - j0);
    std::fill(sum, sum + width, 0.0f);
    for (int64_t k = begin; k < end; ++k) {
      if (b.slots[k] < 0) return false;
      const float* row = b.rows + int64_t{b.slots[k]} * dim + j0;
      for (int j = 0; j < width; ++j) sum[j] += row[j];
    }
    for (int j = 0; j < width; ++j) y[j0 + j] += scale * sum[j];
  }
  return true;
}

// g[0, dim), the gradient of example i's pooled bag, onto the bag's rows.
inline void Scatter(const Bags& b, int64_t i, const float* g) {
  const int64_t at = i * b.num_fields + b.field;
  const int64_t begin = b.offsets[at], end = b.offsets[at + 1];
  if (end == begin) return;
  if (end == begin + 1) {  // one id: scale 1 for sum and mean alike
    float* row = b.row_gradients + int64_t{b.slots[begin]} * b.dim;
    for (int j = 0; j < b.dim; ++j) row[j] += g[j];
    return;
  }
  const float scale = b.mean ? 1.0f / static_cast<float>(end - begin) : 1.0f;
  for (int64_t k = begin; k < end; ++k) {
    float* row = b.row_gradients + int64_t{b.slots[k]} * b.dim;
    for (int j = 0; j < b.dim; ++j) row[j] += scale * g[j];
  }
}

}  // namespace

bool PoolInput(const GraphSpec& spec, const SparseBatch& sparse, int64_t size,
               int value, bool add, int64_t stride, int64_t offset,
               float* out) {
  const Bags bags(spec, sparse, value);
  for (int64_t i = 0; i < size; ++i) {
    if (!Pool(bags, i, add, out + i * stride + offset)) return false;
  }
  return true;
}

void ScatterInput(const GraphSpec& spec, const SparseBatch& sparse,
                  int64_t size, int value, int64_t stride, int64_t offset,
                  const float* grad) {
  const Bags bags(spec, sparse, value);
  for (int64_t i = 0; i < size; ++i) {
    Scatter(bags, i, grad + i * stride + offset);
  }
}

HostNodes::HostNodes(const GraphSpec& spec)
    : on_host_(spec.nodes.size(), false), fused_(spec.num_values(), false) {
  std::vector<int> readers(spec.num_values(), 0);
  for (const GraphNode& node : spec.nodes) {
    for (int v : node.inputs) ++readers[v];
  }
  for (size_t k = 0; k < spec.nodes.size(); ++k) {
    const GraphNode& node = spec.nodes[k];
    bool host =
        (node.kind == NodeKind::kConcatenate && node.output.size() == 1) ||
        node.kind == NodeKind::kAdd;
    bool any_categorical = false;
    for (int v : node.inputs) {
      // Graph inputs only; each categorical one read by this node alone.
      host = host && v < static_cast<int>(spec.inputs.size()) &&
             (!Categorical(spec, v) || readers[v] == 1);
      any_categorical = any_categorical || Categorical(spec, v);
    }
    if (!host || !any_categorical) continue;
    on_host_[k] = true;
    for (int v : node.inputs) {
      if (Categorical(spec, v)) fused_[v] = true;
    }
  }
}

absl::Status HostNodes::Forward(const GraphSpec& spec, size_t k,
                                const ExampleBatch& batch,
                                absl::Span<float> out) const {
  const GraphNode& node = spec.nodes[k];
  const int64_t width = NumElements(node.output);
  const bool add = node.kind == NodeKind::kAdd;
  // Per input: its bags (categorical) or none (the features), its size and
  // where it goes in an example's output.
  std::vector<std::optional<Bags>> bags;
  std::vector<int64_t> sizes, offsets;
  int64_t offset = 0;
  for (size_t n = 0; n < node.inputs.size(); ++n) {
    const int v = node.inputs[n];
    if (Categorical(spec, v)) {
      bags.emplace_back(std::in_place, spec, *batch.sparse, v);
    } else {
      bags.emplace_back();
    }
    sizes.push_back(NumElements(node.input_shapes[n]));
    offsets.push_back(offset);
    if (!add) offset += sizes.back();
  }
  // Example by example: its output row and its bags stay in cache.
  for (int64_t i = 0; i < batch.size; ++i) {
    float* y = out.data() + i * width;
    if (add) std::fill(y, y + width, 0.0f);
    for (size_t n = 0; n < bags.size(); ++n) {
      if (bags[n].has_value()) {
        if (!Pool(*bags[n], i, add, y + offsets[n])) {
          const GraphInput& input = spec.inputs[node.inputs[n]];
          return absl::InternalError(
              absl::StrCat("table ", spec.tables[input.table].name(),
                           " has no row for an id of field ", input.field));
        }
        continue;
      }
      const float* x = batch.features.data() + i * sizes[n];
      if (add) {
        for (int64_t j = 0; j < sizes[n]; ++j) y[j] += x[j];
      } else {
        std::copy(x, x + sizes[n], y + offsets[n]);
      }
    }
  }
  return absl::OkStatus();
}

void HostNodes::Backward(const GraphSpec& spec, size_t k,
                         const ExampleBatch& batch,
                         absl::Span<const float> dy) const {
  const GraphNode& node = spec.nodes[k];
  const int64_t width = NumElements(node.output);
  const bool add = node.kind == NodeKind::kAdd;
  std::vector<Bags> bags;
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (size_t n = 0; n < node.inputs.size(); ++n) {
    const int v = node.inputs[n];
    if (Categorical(spec, v)) {
      bags.emplace_back(spec, *batch.sparse, v);
      offsets.push_back(offset);
    }
    if (!add) offset += NumElements(node.input_shapes[n]);
  }
  for (int64_t i = 0; i < batch.size; ++i) {
    const float* g = dy.data() + i * width;
    for (size_t n = 0; n < bags.size(); ++n)
      Scatter(bags[n], i, g + offsets[n]);
  }
}

}  // namespace psflow
