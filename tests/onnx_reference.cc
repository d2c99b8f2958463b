#include "tests/onnx_reference.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/reader.h"
#include "client/psctl/checkpoint_model.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "data/ctr_examples.h"
#include "model/device/cpu/cpu_device.h"
#include "model/registry.h"

namespace psflow {
namespace testing {
namespace {

// The checkpoint's model on a CPU device with its values loaded. Members
// in this order: the model goes before the device it runs on.
struct LoadedModel {
  std::unique_ptr<CheckpointReader> reader;
  CheckpointModelInfo info;
  std::unique_ptr<ModelDefinition> definition;
  std::unique_ptr<Device> device;
  std::unique_ptr<Model> model;
};

absl::StatusOr<LoadedModel> Load(const std::string& checkpoint,
                                 int64_t max_batch) {
  LoadedModel m;
  ASSIGN_OR_RETURN(m.reader, CheckpointReader::Open(checkpoint));
  ASSIGN_OR_RETURN(m.info, ResolveCheckpointModel(m.reader->index(), ""));
  ASSIGN_OR_RETURN(m.definition, DefineModel(m.info.config, m.info.input));
  m.device = CreateCpuDevice(1);
  ASSIGN_OR_RETURN(m.model,
                   m.definition->Instantiate(m.device.get(), max_batch));
  std::vector<std::vector<float>> values;
  for (const ModelVariable& v : m.definition->variables()) {
    const CheckpointTensor* tensor = m.reader->Find(v.name());
    if (tensor == nullptr) {
      return absl::NotFoundError(absl::StrCat(checkpoint, " lacks ", v.name()));
    }
    ASSIGN_OR_RETURN(std::vector<float> read, m.reader->Read(*tensor));
    values.push_back(std::move(read));
  }
  RETURN_IF_ERROR(m.model->LoadParameters(
      std::vector<absl::Span<const float>>(values.begin(), values.end())));
  return m;
}

std::string Floats(const std::vector<float>& values) {
  return absl::StrCat("[",
                      absl::StrJoin(values, ",",
                                    [](std::string* out, float v) {
                                      absl::StrAppend(
                                          out, absl::StrFormat("%.9g", v));
                                    }),
                      "]");
}

// As strings: JavaScript reads JSON numbers as doubles.
std::string Int64s(const std::vector<int64_t>& values) {
  return absl::StrCat("[",
                      absl::StrJoin(values, ",",
                                    [](std::string* out, int64_t v) {
                                      absl::StrAppend(out, "\"", v, "\"");
                                    }),
                      "]");
}

std::string Tensor(const std::string& name, const std::string& type,
                   const std::vector<int64_t>& dims, const std::string& data) {
  return absl::StrCat("{\"name\":", JsonQuote(name), ",\"type\":\"", type,
                      "\",\"dims\":[", absl::StrJoin(dims, ","),
                      "],\"data\":", data, "}");
}

std::string Result(const std::vector<std::string>& inputs,
                   const std::vector<int64_t>& probability_dims,
                   const std::vector<float>& probabilities,
                   const std::vector<int>& classes) {
  return absl::StrCat("{\"inputs\":[", absl::StrJoin(inputs, ","),
                      "],\"probabilities\":{\"dims\":[",
                      absl::StrJoin(probability_dims, ","),
                      "],\"data\":", Floats(probabilities), "},\"classes\":[",
                      absl::StrJoin(classes, ","), "]}");
}

// The graph's features input's name, or `fallback` for the other kinds.
std::string FeaturesName(const ModelConfig& config,
                         const std::string& fallback) {
  for (const GraphConfig::Input& input : config.graph().inputs()) {
    if (input.has_features()) return input.name();
  }
  return fallback;
}

}  // namespace

absl::StatusOr<std::string> ImageReference(const std::string& checkpoint,
                                           const Dataset& images,
                                           int64_t count) {
  ASSIGN_OR_RETURN(LoadedModel m, Load(checkpoint, 1));
  const int64_t n = std::min(count, images.num_examples);
  const int64_t f = images.num_features;
  const int classes = static_cast<int>(m.info.input.num_classes);
  const float scale = m.definition->feature_scale();
  std::vector<float> pixels(n * f), probabilities(n * classes);
  std::vector<int> predicted(n);
  std::vector<float> features(f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < f; ++k) {
      const uint8_t byte = images.features[i * f + k];
      pixels[i * f + k] = byte;
      features[k] = byte * scale;  // as the reader scales
    }
    for (int c = 0; c < classes; ++c) {
      const int32_t label = c;
      int32_t prediction = 0;
      ASSIGN_OR_RETURN(
          BatchStats stats,
          m.model->Evaluate({1, features, absl::MakeConstSpan(&label, 1)},
                            absl::MakeSpan(&prediction, 1)));
      probabilities[i * classes + c] =
          static_cast<float>(std::exp(-stats.loss_sum));
      predicted[i] = prediction;
    }
  }
  std::vector<int64_t> dims = {n};
  dims.insert(dims.end(), images.example_shape.begin(),
              images.example_shape.end());
  return Result({Tensor(FeaturesName(m.info.config, "pixels"), "float32", dims,
                        Floats(pixels))},
                {n, classes}, probabilities, predicted);
}

absl::StatusOr<std::string> CtrReference(const std::string& checkpoint,
                                         int64_t count, uint64_t seed) {
  ASSIGN_OR_RETURN(LoadedModel m, Load(checkpoint, count));
  const int num_fields = m.info.input.num_fields;
  const int64_t num_dense = m.info.input.num_features();
  const std::vector<ModelTable>& tables = m.definition->tables();
  // Every table's rows by id, and the ids seen per field.
  std::vector<std::unordered_map<int64_t, std::vector<float>>> rows(
      tables.size());
  std::vector<std::vector<int64_t>> seen(num_fields);
  for (size_t t = 0; t < tables.size(); ++t) {
    const CheckpointTable* table = m.reader->FindTable(tables[t].name());
    if (table == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(checkpoint, " lacks table ", tables[t].name()));
    }
    RETURN_IF_ERROR(
        m.reader->ReadTable(*table, [&](const CheckpointReader::RowSegment& s) {
          for (int64_t r = 0; r < s.num_rows; ++r) {
            const float* row = s.values.data() + r * table->dim();
            rows[t][s.ids[r]].assign(row, row + table->dim());
            const int field = CtrFieldOf(s.ids[r]);
            if (field < num_fields) seen[field].push_back(s.ids[r]);
          }
          return absl::OkStatus();
        }));
  }
  std::mt19937_64 random(seed);
  const int64_t raw_values[] = {-3, 0,  0,    1,      2,
                                7,  42, 1000, 123456, 4000000000};
  const int bag_sizes[] = {0, 1, 1, 1, 2, 3};
  std::vector<int64_t> dense_raw(count * num_dense);
  std::vector<float> dense(count * num_dense);
  for (size_t k = 0; k < dense_raw.size(); ++k) {
    dense_raw[k] = raw_values[random() % std::size(raw_values)];
    dense[k] = CtrDenseFeature(dense_raw[k]);
  }
  std::vector<std::vector<int64_t>> bags(count * num_fields);
  size_t longest = 1;
  for (int64_t i = 0; i < count; ++i) {
    for (int f = 0; f < num_fields; ++f) {
      std::vector<int64_t>& bag = bags[i * num_fields + f];
      const int size = bag_sizes[random() % std::size(bag_sizes)];
      for (int k = 0; k < size; ++k) {
        if (!seen[f].empty() && random() % 4 != 0) {
          bag.push_back(seen[f][random() % seen[f].size()]);
        } else {
          bag.push_back(CtrFeatureId(f, random()));  // almost surely unseen
        }
      }
      longest = std::max(longest, bag.size());
    }
  }
  // psflow's side: the SparseBatch the trainer would build, rows from the
  // checkpoint and zeros (the ONNX model's default row) for unseen ids.
  std::vector<int64_t> offsets = {0}, ids, unique;
  std::vector<int32_t> slots;
  std::map<int64_t, int32_t> slot_of;
  for (const std::vector<int64_t>& bag : bags) {
    for (int64_t id : bag) {
      auto [it, added] =
          slot_of.emplace(id, static_cast<int32_t>(unique.size()));
      if (added) unique.push_back(id);
      ids.push_back(id);
      slots.push_back(it->second);
    }
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  std::vector<std::vector<float>> table_rows(tables.size());
  SparseBatch sparse;
  sparse.num_fields = num_fields;
  sparse.offsets = offsets;
  sparse.ids = ids;
  sparse.slots = slots;
  sparse.num_unique = static_cast<int64_t>(unique.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    const int dim = tables[t].dim();
    table_rows[t].assign(unique.size() * dim, 0.0f);
    for (size_t u = 0; u < unique.size(); ++u) {
      auto row = rows[t].find(unique[u]);
      if (row != rows[t].end()) {
        std::copy(row->second.begin(), row->second.end(),
                  table_rows[t].begin() + u * dim);
      }
    }
    sparse.rows.push_back(table_rows[t]);
  }
  std::vector<int32_t> labels(count, 0);
  std::vector<float> probabilities(count);
  ExampleBatch batch{count, dense, labels, 0, &sparse};
  RETURN_IF_ERROR(
      m.model->Score(batch, absl::MakeSpan(probabilities)).status());
  std::vector<int> predicted(count);
  for (int64_t i = 0; i < count; ++i) predicted[i] = probabilities[i] >= 0.5f;

  std::vector<int64_t> padded(count * num_fields * longest, -1);
  for (size_t b = 0; b < bags.size(); ++b) {
    std::copy(bags[b].begin(), bags[b].end(), padded.begin() + b * longest);
  }
  std::vector<std::string> inputs;
  const std::string dense_name = FeaturesName(m.info.config, "");
  if (!dense_name.empty()) {
    inputs.push_back(
        Tensor(dense_name, "int64", {count, num_dense}, Int64s(dense_raw)));
  }
  inputs.push_back(Tensor("ids", "int64",
                          {count, num_fields, static_cast<int64_t>(longest)},
                          Int64s(padded)));
  return Result(inputs, {count, 1}, probabilities, predicted);
}

}  // namespace testing
}  // namespace psflow
