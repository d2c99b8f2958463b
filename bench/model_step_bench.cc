// model_step_bench: a job config's model, whatever its kind, timed one
// TrainStep at a time on the CPU device: the default MLP job, a
// `model.layers` convnet, the wide-and-deep model and any graph. Random
// examples of the config's data (IDX: 28x28 images and 10 classes; CRITEO:
// --num_dense columns and --num_fields fields of one id each, drawn from
// --vocabulary ids per field, their rows random as if pulled). Prints
// microseconds per example, the median of --rounds; the pulls, pushes and
// optimizer the trainer adds are left out: this is the model's own cost.
//
//   bazel build --config=opt //bench:model_step_bench
//   bazel-bin/bench/model_step_bench --job=configs/fashion_mnist_mlp.json
//   bazel-bin/bench/model_step_bench --job=configs/ctr_wide_deep.json
//
// It starts as a worker does: OpenBLAS's fast kernels where a VM hides the
// CPU model and flush-to-zero.
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "common/float_mode.h"
#include "common/job/job_config.h"
#include "model/device/cpu/blas_kernels.h"
#include "model/device/select_device.h"
#include "model/initializer.h"
#include "model/registry.h"

ABSL_FLAG(std::string, job, "configs/fashion_mnist_mlp.json",
          "Job config whose model to measure");
ABSL_FLAG(int, threads, 1, "CPU backend threads");
ABSL_FLAG(int, batch, 64, "Examples per step");
ABSL_FLAG(int, steps, 200, "Training steps per round");
ABSL_FLAG(int, rounds, 5, "Rounds (the median is reported)");
ABSL_FLAG(int, num_dense, 13, "CRITEO: dense columns");
ABSL_FLAG(int, num_fields, 26, "CRITEO: categorical fields");
ABSL_FLAG(int, vocabulary, 100000, "CRITEO: ids per field");

namespace psflow {
namespace {

// A batch and the sparse features it points into.
struct Data {
  std::vector<float> features;
  std::vector<int32_t> labels;
  std::vector<int64_t> offsets, ids;
  std::vector<int32_t> slots;
  std::vector<std::vector<int32_t>> table_slots;
  std::vector<std::vector<float>> rows, row_gradients;
  SparseBatch sparse;
  ExampleBatch batch;
};

void FillSparse(const ModelDefinition& model, int fields, int64_t size,
                std::mt19937& rng, Data& d) {
  std::uniform_int_distribution<int64_t> id(0, absl::GetFlag(FLAGS_vocabulary));
  std::map<int64_t, int32_t> unique;
  d.offsets = {0};
  for (int64_t i = 0; i < size; ++i) {
    for (int f = 0; f < fields; ++f) {
      const int64_t key = (int64_t{f} << 48) | id(rng);
      d.ids.push_back(key);
      auto [it, added] = unique.emplace(key, unique.size());
      d.slots.push_back(it->second);
      d.offsets.push_back(d.ids.size());
    }
  }
  d.sparse.num_fields = fields;
  d.sparse.num_unique = static_cast<int64_t>(unique.size());
  std::uniform_real_distribution<float> value(-0.05f, 0.05f);
  for (const ModelTable& table : model.tables()) {
    const std::set<int> mine(table.fields.begin(), table.fields.end());
    std::vector<int32_t> slots(d.ids.size(), -1);
    std::map<int32_t, int32_t> row_of;  // batch slot -> this table's row
    for (size_t k = 0; k < d.ids.size(); ++k) {
      const int field = static_cast<int>(d.ids[k] >> 48);
      if (!mine.empty() && mine.count(field) == 0) continue;
      auto [it, added] = row_of.emplace(d.slots[k], row_of.size());
      slots[k] = it->second;
    }
    const int64_t rows = mine.empty() ? d.sparse.num_unique : row_of.size();
    if (mine.empty()) slots = d.slots;
    d.table_slots.push_back(std::move(slots));
    d.sparse.table_rows.push_back(rows);
    d.rows.emplace_back(rows * table.dim());
    for (float& x : d.rows.back()) x = value(rng);
    d.row_gradients.emplace_back(rows * table.dim());
  }
  d.sparse.offsets = d.offsets;
  d.sparse.ids = d.ids;
  d.sparse.slots = d.slots;
  for (size_t t = 0; t < d.rows.size(); ++t) {
    d.sparse.table_slots.push_back(d.table_slots[t]);
    d.sparse.rows.push_back(d.rows[t]);
    d.sparse.row_gradients.push_back(absl::MakeSpan(d.row_gradients[t]));
  }
  d.batch.sparse = &d.sparse;
}

void FillBatch(const ModelDefinition& model, const InputSpec& input,
               int64_t size, Data& d) {
  std::mt19937 rng(1);
  const bool ctr = !model.tables().empty();
  std::uniform_real_distribution<float> pixel(0, 255), dense(0, 5);
  std::uniform_int_distribution<int32_t> label(
      0, model.binary() ? 1 : input.num_classes - 1);
  d.features.resize(size * input.num_features());
  for (float& x : d.features) {
    x = ctr ? dense(rng) : pixel(rng) * model.feature_scale();
  }
  d.labels.resize(size);
  for (int32_t& y : d.labels) y = label(rng);
  if (ctr) FillSparse(model, input.num_fields, size, rng, d);
  d.batch.size = size;
  d.batch.features = d.features;
  d.batch.labels = d.labels;
  d.batch.seed = 1;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
  return 1;
}

int Main() {
  absl::StatusOr<JobConfig> job = LoadJobConfigFile(absl::GetFlag(FLAGS_job));
  if (!job.ok()) return Fail(job.status());
  InputSpec input{{28, 28}, 10};
  if (job->data().format() == DataConfig::CRITEO) {
    input = InputSpec{
        {absl::GetFlag(FLAGS_num_dense)}, 2, absl::GetFlag(FLAGS_num_fields)};
  }
  absl::StatusOr<std::unique_ptr<ModelDefinition>> definition =
      DefineModel(job->model(), input);
  if (!definition.ok()) return Fail(definition.status());
  absl::StatusOr<std::unique_ptr<Device>> device =
      SelectDevice("cpu", absl::GetFlag(FLAGS_threads));
  if (!device.ok()) return Fail(device.status());
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  absl::StatusOr<std::unique_ptr<Model>> model =
      (*definition)->Instantiate(device->get(), batch);
  if (!model.ok()) return Fail(model.status());
  const std::vector<std::vector<float>> values =
      InitialValues((*definition)->variables(), 1);
  absl::Status loaded = (*model)->LoadParameters(
      std::vector<absl::Span<const float>>(values.begin(), values.end()));
  if (!loaded.ok()) return Fail(loaded);
  std::vector<std::vector<float>> gradients;
  std::vector<absl::Span<float>> spans;
  for (const auto& v : values) gradients.emplace_back(v.size());
  for (auto& g : gradients) spans.push_back(absl::MakeSpan(g));
  Data data;
  FillBatch(**definition, input, batch, data);
  for (int w = 0; w < 5; ++w) {
    absl::StatusOr<BatchStats> stats = (*model)->TrainStep(data.batch, spans);
    if (!stats.ok()) return Fail(stats.status());
  }
  std::vector<double> rounds;
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    const absl::Time start = absl::Now();
    for (int s = 0; s < absl::GetFlag(FLAGS_steps); ++s) {
      (void)(*model)->TrainStep(data.batch, spans);
    }
    rounds.push_back(absl::ToDoubleSeconds(absl::Now() - start) /
                     absl::GetFlag(FLAGS_steps) / batch * 1e6);
  }
  std::sort(rounds.begin(), rounds.end());
  const double median = rounds[rounds.size() / 2];
  std::printf(
      "%s, batch %lld: %.3f us/example (%.0f examples/s), median of "
      "%zu rounds (%.3f .. %.3f)\n",
      (*definition)->Describe().c_str(), static_cast<long long>(batch), median,
      1e6 / median, rounds.size(), rounds.front(), rounds.back());
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  psflow::UseFastBlasKernels(argv);
  psflow::EnableFlushToZero();
  absl::ParseCommandLine(argc, argv);
  return psflow::Main();
}
