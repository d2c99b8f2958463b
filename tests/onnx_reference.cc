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
#include "data/criteo.h"
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

// The checkpoint's values into m.model.
absl::Status LoadValues(LoadedModel& m) {
  std::vector<std::vector<float>> values;
  for (const ModelVariable& v : m.definition->variables()) {
    const CheckpointTensor* tensor = m.reader->Find(v.name());
    if (tensor == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(m.reader->path(), " lacks ", v.name()));
    }
    ASSIGN_OR_RETURN(std::vector<float> read, m.reader->Read(*tensor));
    values.push_back(std::move(read));
  }
  return m.model->LoadParameters(
      std::vector<absl::Span<const float>>(values.begin(), values.end()));
}

// The checkpoint's model for batches of up to `max_batch`.
absl::StatusOr<LoadedModel> Load(const std::string& checkpoint,
                                 int64_t max_batch) {
  LoadedModel m;
  ASSIGN_OR_RETURN(m.reader, CheckpointReader::Open(checkpoint));
  ASSIGN_OR_RETURN(m.info, ResolveCheckpointModel(m.reader->index(), ""));
  ASSIGN_OR_RETURN(m.definition, DefineModel(m.info.config, m.info.input));
  m.device = CreateCpuDevice(1);
  ASSIGN_OR_RETURN(m.model,
                   m.definition->Instantiate(m.device.get(), max_batch));
  RETURN_IF_ERROR(LoadValues(m));
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

namespace {

// Every table's rows by id, read from the checkpoint.
using TableRows = std::vector<std::unordered_map<int64_t, std::vector<float>>>;

absl::StatusOr<TableRows> ReadTables(const LoadedModel& m) {
  const std::vector<ModelTable>& tables = m.definition->tables();
  TableRows rows(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    const CheckpointTable* table = m.reader->FindTable(tables[t].name());
    if (table == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(m.reader->path(), " lacks table ", tables[t].name()));
    }
    RETURN_IF_ERROR(
        m.reader->ReadTable(*table, [&](const CheckpointReader::RowSegment& s) {
          for (int64_t r = 0; r < s.num_rows; ++r) {
            const float* row = s.values.data() + r * table->dim();
            rows[t][s.ids[r]].assign(row, row + table->dim());
          }
          return absl::OkStatus();
        }));
  }
  return rows;
}

// psflow's probabilities for `examples` (dense features already
// transformed, as the reader gives them): the SparseBatch the trainer
// would build, rows from the checkpoint and zeros (the ONNX model's
// default row) for ids the tables do not hold.
absl::StatusOr<std::vector<float>> Score(LoadedModel& m, const TableRows& rows,
                                         const CtrExamples& examples) {
  const std::vector<ModelTable>& tables = m.definition->tables();
  std::vector<int64_t> unique;
  std::vector<int32_t> slots;
  std::map<int64_t, int32_t> slot_of;
  for (int64_t id : examples.ids) {
    auto [it, added] = slot_of.emplace(id, static_cast<int32_t>(unique.size()));
    if (added) unique.push_back(id);
    slots.push_back(it->second);
  }
  std::vector<std::vector<float>> table_rows(tables.size());
  SparseBatch sparse;
  sparse.num_fields = examples.num_fields;
  sparse.offsets = examples.offsets;
  sparse.ids = examples.ids;
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
  const int64_t n = examples.num_examples;
  std::vector<int32_t> labels(n, 0);
  std::vector<float> probabilities(n);
  ExampleBatch batch{n, examples.dense, labels, 0, &sparse};
  RETURN_IF_ERROR(
      m.model->Score(batch, absl::MakeSpan(probabilities)).status());
  return probabilities;
}

std::vector<int> BinaryClasses(const std::vector<float>& probabilities) {
  std::vector<int> classes;
  for (float p : probabilities) classes.push_back(p >= 0.5f ? 1 : 0);
  return classes;
}

}  // namespace

absl::StatusOr<std::string> CtrReference(const std::string& checkpoint,
                                         int64_t count, uint64_t seed) {
  ASSIGN_OR_RETURN(LoadedModel m, Load(checkpoint, count));
  ASSIGN_OR_RETURN(TableRows rows, ReadTables(m));
  CtrExamples examples;
  examples.num_fields = m.info.input.num_fields;
  examples.num_dense = static_cast<int>(m.info.input.num_features());
  examples.num_examples = count;
  const int num_fields = examples.num_fields;
  const int64_t num_dense = examples.num_dense;
  // The ids the tables hold, per field, in a fixed order.
  std::vector<std::vector<int64_t>> seen(num_fields);
  for (const auto& table : rows) {
    for (const auto& [id, row] : table) {
      const int field = CtrFieldOf(id);
      if (field < num_fields) seen[field].push_back(id);
    }
  }
  for (std::vector<int64_t>& ids : seen) std::sort(ids.begin(), ids.end());
  std::mt19937_64 random(seed);
  const int64_t raw_values[] = {-3, 0,  0,    1,      2,
                                7,  42, 1000, 123456, 4000000000};
  const int bag_sizes[] = {0, 1, 1, 1, 2, 3};
  std::vector<int64_t> dense_raw(count * num_dense);
  for (int64_t& x : dense_raw) {
    x = raw_values[random() % std::size(raw_values)];
    examples.dense.push_back(CtrDenseFeature(x));
  }
  std::vector<std::vector<int64_t>> bags(count * num_fields);
  size_t longest = 1;
  examples.offsets = {0};
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
      examples.ids.insert(examples.ids.end(), bag.begin(), bag.end());
      examples.offsets.push_back(static_cast<int64_t>(examples.ids.size()));
    }
  }
  ASSIGN_OR_RETURN(std::vector<float> probabilities, Score(m, rows, examples));

  std::vector<int64_t> padded(count * num_fields * longest, -1);
  for (size_t b = 0; b < bags.size(); ++b) {
    std::copy(bags[b].begin(), bags[b].end(), padded.begin() + b * longest);
  }
  std::vector<std::string> inputs;
  // wide_deep's dense features are "dense"; a graph's are its features
  // input's name.
  const std::string dense_name =
      m.info.config.has_wide_deep() ? "dense" : FeaturesName(m.info.config, "");
  if (!dense_name.empty()) {
    inputs.push_back(
        Tensor(dense_name, "int64", {count, num_dense}, Int64s(dense_raw)));
  }
  inputs.push_back(Tensor("ids", "int64",
                          {count, num_fields, static_cast<int64_t>(longest)},
                          Int64s(padded)));
  return Result(inputs, {count, 1}, probabilities,
                BinaryClasses(probabilities));
}

absl::StatusOr<std::string> CtrTextReference(const std::string& checkpoint,
                                             const std::string& text) {
  absl::StatusOr<CtrExamples> examples;
  {
    // The format, then the model for that many examples.
    ASSIGN_OR_RETURN(LoadedModel probe, Load(checkpoint, 1));
    examples = ParseCriteoText(
        text,
        CriteoFormatOf(static_cast<int>(probe.info.input.num_features()),
                       probe.info.input.num_fields),
        "the reference lines");
  }
  RETURN_IF_ERROR(examples.status());
  ASSIGN_OR_RETURN(LoadedModel m, Load(checkpoint, examples->num_examples));
  ASSIGN_OR_RETURN(TableRows rows, ReadTables(m));
  ASSIGN_OR_RETURN(std::vector<float> probabilities, Score(m, rows, *examples));
  return Result({}, {examples->num_examples, 1}, probabilities,
                BinaryClasses(probabilities));
}

}  // namespace testing
}  // namespace psflow
