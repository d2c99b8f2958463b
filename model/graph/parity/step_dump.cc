#include "model/graph/parity/step_dump.h"

#include <algorithm>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "data/criteo.h"
#include "google/protobuf/util/json_util.h"
#include "model/device/cpu/cpu_device.h"
#include "model/graph/graph_model.h"
#include "model/initializer.h"

namespace psflow {
namespace {

// The batch as the trainer hands it to the model: its distinct ids
// (sorted) and each id's slot among them; per table, the distinct ids of
// the table's fields (ModelTable::fields; all for a table of every field),
// each id's row among them (-1 for another field's id) and the table's
// rows of those ids.
struct PulledBatch {
  std::vector<int64_t> unique;
  std::vector<int32_t> slots;
  std::vector<std::vector<int64_t>> table_ids;  // per table, sorted
  std::vector<std::vector<int32_t>> table_slots;
  std::vector<std::vector<float>> rows, row_gradients;  // per table
  SparseBatch sparse;
};

// `sorted`'s index of each of `ids` (-1 for one not in it).
std::vector<int32_t> SlotsIn(const std::vector<int64_t>& sorted,
                             const std::vector<int64_t>& ids) {
  std::vector<int32_t> slots;
  for (int64_t id : ids) {
    const auto at = std::lower_bound(sorted.begin(), sorted.end(), id);
    slots.push_back(at != sorted.end() && *at == id
                        ? static_cast<int32_t>(at - sorted.begin())
                        : -1);
  }
  return slots;
}

std::vector<int64_t> SortedUnique(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void Pull(const RandomBatch& batch, const StepDump& dump,
          const std::vector<std::vector<float>>& tables, PulledBatch& pulled) {
  const int num_fields = dump.input.num_fields;
  pulled.unique = SortedUnique(batch.ids);
  pulled.slots = SlotsIn(pulled.unique, batch.ids);
  // The field of each of the batch's ids, from the bag it is in.
  std::vector<int> field_of(batch.ids.size());
  for (size_t bag = 0; bag + 1 < batch.offsets.size(); ++bag) {
    for (int64_t k = batch.offsets[bag]; k < batch.offsets[bag + 1]; ++k) {
      field_of[k] = static_cast<int>(bag % num_fields);
    }
  }
  for (size_t t = 0; t < dump.tables.size(); ++t) {
    const std::vector<int>& fields = dump.tables[t].fields;
    std::vector<int64_t> mine;
    for (size_t k = 0; k < batch.ids.size(); ++k) {
      if (fields.empty() || std::find(fields.begin(), fields.end(),
                                      field_of[k]) != fields.end()) {
        mine.push_back(batch.ids[k]);
      }
    }
    pulled.table_ids.push_back(SortedUnique(std::move(mine)));
    std::vector<int32_t> slots = SlotsIn(pulled.table_ids[t], batch.ids);
    for (size_t k = 0; k < slots.size(); ++k) {
      if (!fields.empty() && std::find(fields.begin(), fields.end(),
                                       field_of[k]) == fields.end()) {
        slots[k] = -1;  // another field's id, even if the value recurs
      }
    }
    pulled.table_slots.push_back(std::move(slots));
    const int dim = dump.tables[t].dim();
    std::vector<float> rows;
    for (int64_t id : pulled.table_ids[t]) {
      rows.insert(rows.end(), tables[t].begin() + id * dim,
                  tables[t].begin() + (id + 1) * dim);
    }
    pulled.rows.push_back(std::move(rows));
    pulled.row_gradients.emplace_back(pulled.table_ids[t].size() * dim);
  }
  SparseBatch& sparse = pulled.sparse;
  sparse.num_fields = num_fields;
  sparse.offsets = batch.offsets;
  sparse.ids = batch.ids;
  sparse.slots = pulled.slots;
  sparse.num_unique = static_cast<int64_t>(pulled.unique.size());
  for (size_t t = 0; t < dump.tables.size(); ++t) {
    sparse.table_slots.push_back(pulled.table_slots[t]);
    sparse.table_rows.push_back(
        static_cast<int64_t>(pulled.table_ids[t].size()));
    sparse.rows.push_back(pulled.rows[t]);
    sparse.row_gradients.push_back(absl::MakeSpan(pulled.row_gradients[t]));
  }
}

// One TrainStep and one Score of `record.batch` at `values` and `tables`.
absl::Status RunStep(Model& model, const StepDump& dump,
                     const std::vector<std::vector<float>>& values,
                     const std::vector<std::vector<float>>& tables,
                     StepRecord& record) {
  const RandomBatch& batch = record.batch;
  PulledBatch pulled;
  Pull(batch, dump, tables, pulled);
  std::vector<absl::Span<const float>> parameters(values.begin(), values.end());
  RETURN_IF_ERROR(model.LoadParameters(parameters));
  std::vector<absl::Span<float>> gradients;
  for (const ModelVariable& v : dump.variables) {
    record.gradients.emplace_back(v.num_elements());
    gradients.push_back(absl::MakeSpan(record.gradients.back()));
  }
  ExampleBatch example{batch.size, batch.features, batch.labels, 0};
  example.sparse = &pulled.sparse;
  ASSIGN_OR_RETURN(BatchStats stats, model.TrainStep(example, gradients));
  record.loss = stats.loss_sum / static_cast<double>(batch.size);
  record.probabilities.resize(batch.size);
  RETURN_IF_ERROR(
      model.Score(example, absl::MakeSpan(record.probabilities)).status());
  for (size_t t = 0; t < dump.tables.size(); ++t) {
    const int dim = dump.tables[t].dim();
    std::vector<float> full(dump.num_ids * dim, 0.0f);
    for (size_t k = 0; k < pulled.table_ids[t].size(); ++k) {
      std::copy_n(pulled.row_gradients[t].begin() + k * dim, dim,
                  full.begin() + pulled.table_ids[t][k] * dim);
    }
    record.row_gradients.push_back(std::move(full));
  }
  return absl::OkStatus();
}

// What the parameter servers would do with the step's pushes, with SGD.
void Apply(const StepDump& dump, const StepRecord& record, float lr,
           std::vector<std::vector<float>>& values,
           std::vector<std::vector<float>>& tables) {
  for (size_t v = 0; v < values.size(); ++v) {
    const ModelVariable& variable = dump.variables[v];
    const std::vector<float>& g = record.gradients[v];
    const float m = variable.variable.momentum;
    for (size_t i = 0; i < g.size(); ++i) {
      values[v][i] = variable.trainable() ? values[v][i] - lr * g[i]
                                          : m * values[v][i] + (1 - m) * g[i];
    }
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    for (size_t i = 0; i < tables[t].size(); ++i) {
      tables[t][i] -= lr * record.row_gradients[t][i];
    }
  }
}

}  // namespace

absl::StatusOr<StepDump> RunGraphSteps(const JobConfig& job,
                                       const StepDumpOptions& options) {
  if (!job.model().has_graph()) {
    return absl::InvalidArgumentError(
        "the job config has no model.graph; the step dump runs graph models "
        "(docs/models.md)");
  }
  if (job.data().format() != DataConfig::CRITEO) {
    return absl::InvalidArgumentError(
        "the job's data.format is not CRITEO; the step dump draws "
        "CRITEO-shaped batches (dense features and categorical fields)");
  }
  if (options.steps < 1 || options.batch.size < 1 ||
      options.batch.ids_per_field < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps ", options.steps, ", batch ", options.batch.size,
                     ", ids per field ", options.batch.ids_per_field,
                     ": each must be at least 1"));
  }
  const CriteoFormat format = CriteoFormatOf(job.data());
  StepDump dump;
  dump.input.example_shape = {format.num_dense};
  dump.input.num_classes = 2;
  dump.input.num_fields = format.num_fields;
  dump.graph = job.model().graph();
  ASSIGN_OR_RETURN(std::unique_ptr<GraphDefinition> definition,
                   GraphDefinition::Create(dump.graph, dump.input));
  const GraphSpec& spec = definition->spec();
  for (int v = 0; v < spec.num_values(); ++v) {
    dump.values.emplace_back(spec.name(v), spec.shape(v));
  }
  dump.variables = definition->variables();
  dump.tables = definition->tables();
  dump.num_ids = VocabularySize(dump.input, options.batch);
  dump.initial_values = InitialValues(dump.variables, options.seed);
  uint64_t state = options.seed;
  for (const ModelTable& table : dump.tables) {
    dump.initial_rows.push_back(
        UniformValues(dump.num_ids * table.dim(), options.row_scale, state));
  }
  // One thread: the CPU device's results do not depend on the count, and
  // the dump is small.
  std::unique_ptr<Device> cpu;
  Device* device = options.device;
  if (device == nullptr) {
    cpu = CreateCpuDevice(1);
    device = cpu.get();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   definition->Instantiate(device, options.batch.size));
  std::vector<std::vector<float>> values = dump.initial_values;
  std::vector<std::vector<float>> tables = dump.initial_rows;
  for (int step = 0; step < options.steps; ++step) {
    StepRecord record;
    record.batch = DrawRandomBatch(dump.input, options.batch, state);
    RETURN_IF_ERROR(RunStep(*model, dump, values, tables, record));
    Apply(dump, record, options.learning_rate, values, tables);
    dump.steps.push_back(std::move(record));
  }
  return dump;
}

namespace {

// The float32 values, appended in order; each array named in the manifest
// as [offset, count] in floats.
class Blob {
 public:
  std::string Add(absl::Span<const float> values) {
    const std::string ref =
        absl::StrCat("[", floats_, ", ", values.size(), "]");
    bytes_.append(reinterpret_cast<const char*>(values.data()),
                  values.size() * sizeof(float));
    floats_ += static_cast<int64_t>(values.size());
    return ref;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
  int64_t floats_ = 0;
};

// The blob is the host's floats as they are: say so where that is not
// little-endian IEEE (parity_check.py reads "<f4").
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the step dump writes little-endian float32");

template <typename T>
std::string JsonInts(const std::vector<T>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

std::string Refs(Blob& blob, const std::vector<std::vector<float>>& arrays) {
  std::vector<std::string> refs;
  for (const auto& a : arrays) refs.push_back(blob.Add(a));
  return absl::StrCat("[", absl::StrJoin(refs, ", "), "]");
}

}  // namespace

absl::Status WriteStepDump(const StepDump& dump, const std::string& config_path,
                           const StepDumpOptions& options,
                           const std::string& manifest_path) {
  if (!absl::EndsWith(manifest_path, ".json")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step dump path ", manifest_path, " does not end in .json"));
  }
  const std::string blob_path =
      absl::StrCat(manifest_path.substr(0, manifest_path.size() - 5), ".f32");
  std::string graph;
  const auto printed =
      google::protobuf::util::MessageToJsonString(dump.graph, &graph);
  if (!printed.ok()) {
    return absl::InternalError(
        absl::StrCat("printing model.graph: ", printed.ToString()));
  }
  Blob blob;
  std::string json = absl::StrCat(
      "{\n\"format\": \"psflow graph step dump 1\",\n\"config\": ",
      JsonQuote(config_path), ",\n\"blob\": ",
      JsonQuote(blob_path.substr(blob_path.find_last_of('/') + 1)),
      ",\n\"learning_rate\": ", absl::StrFormat("%.9g", options.learning_rate),
      ",\n\"seed\": ", options.seed,
      ",\n\"input\": {\"num_dense\": ", dump.input.num_features(),
      ", \"num_fields\": ", dump.input.num_fields,
      ", \"num_classes\": ", dump.input.num_classes,
      "},\n\"num_ids\": ", dump.num_ids, ",\n\"graph\": ", graph,
      ",\n\"values\": [");
  for (size_t v = 0; v < dump.values.size(); ++v) {
    absl::StrAppend(&json, v == 0 ? "\n" : ",\n",
                    "{\"name\": ", JsonQuote(dump.values[v].first),
                    ", \"shape\": ", JsonInts(dump.values[v].second), "}");
  }
  absl::StrAppend(&json, "],\n\"variables\": [");
  for (size_t v = 0; v < dump.variables.size(); ++v) {
    const ModelVariable& var = dump.variables[v];
    absl::StrAppend(
        &json, v == 0 ? "\n" : ",\n", "{\"name\": ", JsonQuote(var.name()),
        ", \"shape\": ", JsonInts(var.shape()),
        ", \"trainable\": ", var.trainable() ? "true" : "false",
        ", \"momentum\": ", absl::StrFormat("%.9g", var.variable.momentum),
        ", \"initial\": ", blob.Add(dump.initial_values[v]), "}");
  }
  absl::StrAppend(&json, "],\n\"tables\": [");
  for (size_t t = 0; t < dump.tables.size(); ++t) {
    absl::StrAppend(&json, t == 0 ? "\n" : ",\n",
                    "{\"name\": ", JsonQuote(dump.tables[t].name()),
                    ", \"dim\": ", dump.tables[t].dim(),
                    ", \"fields\": ", JsonInts(dump.tables[t].fields),
                    ", \"initial\": ", blob.Add(dump.initial_rows[t]), "}");
  }
  absl::StrAppend(&json, "],\n\"steps\": [");
  for (size_t s = 0; s < dump.steps.size(); ++s) {
    const StepRecord& step = dump.steps[s];
    absl::StrAppend(
        &json, s == 0 ? "\n" : ",\n", "{\"size\": ", step.batch.size,
        ",\n \"features\": ", blob.Add(step.batch.features),
        ",\n \"labels\": ", JsonInts(step.batch.labels),
        ",\n \"offsets\": ", JsonInts(step.batch.offsets),
        ",\n \"ids\": ", JsonInts(step.batch.ids),
        ",\n \"loss\": ", absl::StrFormat("%.17g", step.loss),
        ",\n \"probabilities\": ", blob.Add(step.probabilities),
        ",\n \"gradients\": ", Refs(blob, step.gradients),
        ",\n \"row_gradients\": ", Refs(blob, step.row_gradients), "}");
  }
  absl::StrAppend(&json, "]\n}\n");
  RETURN_IF_ERROR(WriteFileAtomically(blob_path, blob.bytes()));
  return WriteFileAtomically(manifest_path, json);
}

}  // namespace psflow
