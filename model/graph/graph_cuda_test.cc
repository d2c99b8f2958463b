// Graph models (model/graph/) on the GPU and on the CPU backend, from the
// same parameters and rows on the same batches (issue 34: the new layers'
// CUDA kernels agree with the CPU ones). Each case trains a job's graph
// three SGD steps on each device with parity/step_dump.h (each side applies
// its own gradients, so any drift compounds) and compares, step by step,
// the loss, the probabilities (inference mode: Dropout the identity,
// BatchNormalization on its moving statistics), every variable's gradient
// (BatchNormalization's batch statistics among them) and every table row's
// gradient, within a bound derived from float32 rounding (RelativeBound).
//
// Cases: every recommendation zoo config (configs/ctr_*.json at their own
// sizes; ctr_wide_deep.json's `wide_deep` kind as the graph it runs as),
// the parity test's graph of every option, and a small graph per
// multi-input node and option: Concatenate (last axis, axis 0, an inner
// axis), Add and Multiply (an input named twice), DotInteraction without
// and with self interaction (separate inputs and one [F, d] input), Cross
// full and low rank (one and two inputs, with and without bias),
// FactorizationMachine (separate and stacked fields), Reshape and Flatten,
// sum and mean pooling (joined on the host, and read by several nodes on
// the device), Dropout (training masks and inference) and
// BatchNormalization (default, without center, without scale).
//
// Each case prints its worst |gpu - cpu| as a share of its bound, so a run
// that passes still shows the margin. Skips without a GPU (tag "gpu").
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/job/job_config.h"
#include "common/status_matchers.h"
#include "data/criteo.h"
#include "gtest/gtest.h"
#include "model/device/cuda_backend.h"
#include "model/device/device_test_util.h"
#include "model/graph/graph_spec.h"
#include "model/graph/parity/step_dump.h"
#include "model/registry.h"

namespace psflow {
namespace {

constexpr int kBatch = 64;
constexpr int kSteps = 3;

// The zoo configs and the parity test's graph, embedded at build time
// (BUILD: graph_cuda_test_configs) so that the binary runs anywhere.
struct EmbeddedConfig {
  const char* name;
  const char* json;
};
constexpr EmbeddedConfig kEmbedded[] = {
#include "model/graph/graph_cuda_test_configs.inc"
};

// A CRITEO job with `num_dense` dense features, `num_fields` categorical
// fields and `graph` as its model (the batches are drawn, not read).
std::string SmallJob(int num_dense, int num_fields, absl::string_view graph) {
  return absl::StrCat(
      R"({"name": "graph_cuda_test", "optimizer": {"kind": "SGD"},
          "learning_rate": {"kind": "CONSTANT", "learning_rate": 0.1},
          "data": {"format": "CRITEO",
                   "train_path": "/tmp/psflow-data/graph_cuda_test/train.txt",
                   "num_dense": )",
      num_dense, R"(, "num_fields": )", num_fields, R"(},
          "training": {"batch_size": 64, "epochs": 1, "mode": "ASYNC",
                       "seed": 1},
          "model": {"graph": )",
      graph, "}}");
}

struct Case {
  std::string name;
  std::string json;  // the job config
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// One small graph per node and option (see the file's comment). Inputs:
// "dense" (the features) and categorical fields A, B, C, ... of 8 floats.
std::vector<Case> NodeCases() {
  std::vector<Case> cases;
  cases.push_back({"ConcatenateAddMultiplyReshapeFlatten", SmallJob(6, 2, R"({
    "inputs": [
      {"name": "dense", "features": {}},
      {"name": "A", "categorical": {"field": 0, "table": "emb", "dim": 8}},
      {"name": "B", "categorical": {"field": 1, "table": "emb", "dim": 8,
                                    "pooling": "mean"}}
    ],
    "nodes": [
      {"name": "a", "inputs": ["dense"], "layer": {"Dense": {"units": 8}}},
      {"name": "b", "inputs": ["dense"],
       "layer": {"Dense": {"units": 8, "activation": "tanh"}}},
      {"name": "joined", "inputs": ["a", "b", "A"], "layer": {"Concatenate": {}}},
      {"name": "sum", "inputs": ["a", "b", "a", "B"], "layer": {"Add": {}}},
      {"name": "product", "inputs": ["a", "b", "sum", "A"],
       "layer": {"Multiply": {}}},
      {"name": "a2", "inputs": ["a"], "layer": {"Reshape": {"target_shape": [2, 4]}}},
      {"name": "b2", "inputs": ["b"], "layer": {"Reshape": {"target_shape": [-1, 4]}}},
      {"name": "rows", "inputs": ["a2", "b2"], "layer": {"Concatenate": {"axis": 0}}},
      {"name": "columns", "inputs": ["a2", "b2"], "layer": {"Concatenate": {"axis": -1}}},
      {"name": "rows_flat", "inputs": ["rows"], "layer": {"Flatten": {}}},
      {"name": "columns_flat", "inputs": ["columns"], "layer": {"Flatten": {}}},
      {"name": "all", "inputs": ["joined", "product", "rows_flat", "columns_flat"],
       "layer": {"Concatenate": {}}},
      {"name": "hidden", "inputs": ["all"],
       "layer": {"Dense": {"units": 16, "activation": "sigmoid"}}},
      {"name": "logit", "inputs": ["hidden"], "layer": {"Dense": {"units": 1}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })")});
  for (const char* self : {"false", "true"}) {
    cases.push_back(
        {absl::StrCat("DotInteraction",
                      std::string(self) == "true" ? "WithSelf" : "NoSelf"),
         SmallJob(6, 3,
                  absl::StrCat(R"({
    "inputs": [
      {"name": "dense", "features": {}},
      {"name": "A", "categorical": {"field": 0, "table": "emb", "dim": 8}},
      {"name": "B", "categorical": {"field": 1, "table": "emb", "dim": 8,
                                    "pooling": "mean"}},
      {"name": "C", "categorical": {"field": 2, "dim": 8}}
    ],
    "nodes": [
      {"name": "bottom", "inputs": ["dense"],
       "layer": {"Dense": {"units": 8, "activation": "tanh"}}},
      {"name": "interact", "inputs": ["bottom", "A", "B", "C", "bottom"],
       "layer": {"DotInteraction": {"self_interaction": )",
                               self, R"(}}},
      {"name": "fields", "inputs": ["bottom", "A", "B", "C"],
       "layer": {"Concatenate": {}}},
      {"name": "stacked", "inputs": ["fields"],
       "layer": {"Reshape": {"target_shape": [-1, 8]}}},
      {"name": "interact2", "inputs": ["stacked"],
       "layer": {"DotInteraction": {"self_interaction": )",
                               self, R"(}}},
      {"name": "top", "inputs": ["bottom", "interact", "interact2"],
       "layer": {"Concatenate": {}}},
      {"name": "hidden", "inputs": ["top"],
       "layer": {"Dense": {"units": 16, "activation": "tanh"}}},
      {"name": "logit", "inputs": ["hidden"], "layer": {"Dense": {"units": 1}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })"))});
  }
  cases.push_back({"CrossFullAndLowRank", SmallJob(6, 1, R"({
    "inputs": [
      {"name": "dense", "features": {}},
      {"name": "A", "categorical": {"field": 0, "dim": 8}}
    ],
    "nodes": [
      {"name": "x", "inputs": ["dense"],
       "layer": {"Dense": {"units": 8, "activation": "tanh"}}},
      {"name": "x0", "inputs": ["x", "A"], "layer": {"Concatenate": {}}},
      {"name": "c1", "inputs": ["x0"], "layer": {"Cross": {}}},
      {"name": "c2", "inputs": ["x0", "c1"],
       "layer": {"Cross": {"projection_dim": 4}}},
      {"name": "c3", "inputs": ["c2", "c1"],
       "layer": {"Cross": {"use_bias": false}}},
      {"name": "c4", "inputs": ["c3"],
       "layer": {"Cross": {"projection_dim": 3, "use_bias": false}}},
      {"name": "logit", "inputs": ["c4"], "layer": {"Dense": {"units": 1}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })")});
  cases.push_back({"FactorizationMachine", SmallJob(6, 3, R"({
    "inputs": [
      {"name": "dense", "features": {}},
      {"name": "A", "categorical": {"field": 0, "table": "emb", "dim": 8}},
      {"name": "B", "categorical": {"field": 1, "table": "emb", "dim": 8}},
      {"name": "C", "categorical": {"field": 2, "table": "emb", "dim": 8,
                                    "pooling": "mean"}},
      {"name": "W0", "categorical": {"field": 0, "table": "first", "dim": 1}},
      {"name": "W1", "categorical": {"field": 1, "table": "first", "dim": 1}},
      {"name": "W2", "categorical": {"field": 2, "table": "first", "dim": 1}}
    ],
    "nodes": [
      {"name": "fm", "inputs": ["A", "B", "C"],
       "layer": {"FactorizationMachine": {}}},
      {"name": "d", "inputs": ["dense"],
       "layer": {"Dense": {"units": 8, "activation": "tanh"}}},
      {"name": "fields", "inputs": ["d", "A", "B", "C"],
       "layer": {"Concatenate": {}}},
      {"name": "stacked", "inputs": ["fields"],
       "layer": {"Reshape": {"target_shape": [4, 8]}}},
      {"name": "fm2", "inputs": ["stacked"],
       "layer": {"FactorizationMachine": {}}},
      {"name": "first_order", "inputs": ["W0", "W1", "W2"], "layer": {"Add": {}}},
      {"name": "deep", "inputs": ["d"], "layer": {"Dense": {"units": 1}}},
      {"name": "logit", "inputs": ["deep", "fm", "fm2", "first_order"],
       "layer": {"Add": {}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })")});
  // A and B are joined with the features on the host (read by no other
  // node); C is pooled on its own and read by two nodes on the device; D
  // and E (one float per id) are summed on the host.
  cases.push_back({"SumAndMeanPooling", SmallJob(6, 5, R"({
    "inputs": [
      {"name": "dense", "features": {}},
      {"name": "A", "categorical": {"field": 0, "table": "emb", "dim": 8}},
      {"name": "B", "categorical": {"field": 1, "table": "emb", "dim": 8,
                                    "pooling": "mean"}},
      {"name": "C", "categorical": {"field": 2, "dim": 8, "pooling": "mean"}},
      {"name": "D", "categorical": {"field": 3, "table": "wide", "dim": 1}},
      {"name": "E", "categorical": {"field": 4, "table": "wide", "dim": 1,
                                    "pooling": "mean"}}
    ],
    "nodes": [
      {"name": "deep_input", "inputs": ["dense", "A", "B"],
       "layer": {"Concatenate": {}}},
      {"name": "h", "inputs": ["deep_input"],
       "layer": {"Dense": {"units": 8, "activation": "tanh"}}},
      {"name": "gate", "inputs": ["h", "C"], "layer": {"Multiply": {}}},
      {"name": "top", "inputs": ["h", "gate", "C"], "layer": {"Concatenate": {}}},
      {"name": "deep_logit", "inputs": ["top"], "layer": {"Dense": {"units": 1}}},
      {"name": "wide", "inputs": ["D", "E"], "layer": {"Add": {}}},
      {"name": "logit", "inputs": ["deep_logit", "wide"], "layer": {"Add": {}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })")});
  cases.push_back({"Dropout", SmallJob(6, 1, R"({
    "inputs": [
      {"name": "dense", "features": {}},
      {"name": "A", "categorical": {"field": 0, "dim": 8}}
    ],
    "nodes": [
      {"name": "h", "inputs": ["dense"],
       "layer": {"Dense": {"units": 16, "activation": "tanh"}}},
      {"name": "drop", "inputs": ["h"], "layer": {"Dropout": {"rate": 0.3}}},
      {"name": "h2", "inputs": ["drop"],
       "layer": {"Dense": {"units": 8, "activation": "sigmoid"}}},
      {"name": "joined", "inputs": ["h2", "A"], "layer": {"Concatenate": {}}},
      {"name": "drop2", "inputs": ["joined"], "layer": {"Dropout": {"rate": 0.5}}},
      {"name": "logit", "inputs": ["drop2"], "layer": {"Dense": {"units": 1}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })")});
  cases.push_back({"BatchNormalization", SmallJob(6, 1, R"({
    "inputs": [
      {"name": "dense", "features": {}},
      {"name": "A", "categorical": {"field": 0, "dim": 8}}
    ],
    "nodes": [
      {"name": "bn0", "inputs": ["dense"], "layer": {"BatchNormalization": {}}},
      {"name": "h", "inputs": ["bn0"],
       "layer": {"Dense": {"units": 8, "activation": "tanh"}}},
      {"name": "joined", "inputs": ["h", "A"], "layer": {"Concatenate": {}}},
      {"name": "bn1", "inputs": ["joined"],
       "layer": {"BatchNormalization": {"center": false, "momentum": 0.9}}},
      {"name": "h2", "inputs": ["bn1"],
       "layer": {"Dense": {"units": 8, "activation": "sigmoid"}}},
      {"name": "bn2", "inputs": ["h2"],
       "layer": {"BatchNormalization": {"scale": false, "epsilon": 0.01}}},
      {"name": "logit", "inputs": ["bn2"], "layer": {"Dense": {"units": 1}}}
    ],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}
  })")});
  return cases;
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const EmbeddedConfig& config : kEmbedded) {
    cases.push_back({config.name, config.json});
  }
  for (Case& c : NodeCases()) cases.push_back(std::move(c));
  return cases;
}

// The job, its `wide_deep` model (if that is its kind) replaced by the
// graph it runs as (registry.h ModelGraph; the kind's variable names and
// initializers do not matter here).
absl::StatusOr<JobConfig> GraphJob(const Case& c) {
  absl::StatusOr<JobConfig> job = ParseJobConfig(c.json, c.name);
  if (!job.ok() || job->model().has_graph()) return job;
  const CriteoFormat format = CriteoFormatOf(job->data());
  InputSpec input;
  input.example_shape = {format.num_dense};
  input.num_classes = 2;
  input.num_fields = format.num_fields;
  absl::StatusOr<LegacyGraph> graph = ModelGraph(job->model(), input);
  if (!graph.ok()) return graph.status();
  *job->mutable_model()->mutable_graph() = graph->graph;
  return job;
}

// How far two float32 evaluations of `spec`'s graph at `batch` examples
// may be apart, relative to the magnitude of what is compared. Node n's
// kernel forms float32 sums of at most K_n terms: its inputs' width (a
// Dense or Cross product, an interaction, the factorization machine's
// sums), its output's width (the input gradient of a product) or the
// batch (weight gradients, batch statistics, bias gradients). Two orders
// of one sum differ by up to 8 sqrt(K) eps of the sum of its terms'
// magnitudes (ExpectSameSum, model/device/device_test_util.h), and a
// node's rounding reaches the loss and every gradient through the nodes
// after it, so the bound adds the nodes' up: 8 eps sum_n sqrt(K_n). For
// DLRM at batch 64 that is 9.7e-5, for DCN-v2 1.6e-4.
double RelativeBound(const GraphSpec& spec, int64_t batch) {
  double sum = 0;
  for (const GraphNode& node : spec.nodes) {
    int64_t inputs = 0;
    for (const Shape& shape : node.input_shapes) inputs += NumElements(shape);
    const int64_t terms = std::max(
        {batch, inputs, static_cast<int64_t>(NumElements(node.output))});
    sum += std::sqrt(static_cast<double>(terms));
  }
  return 8 * FLT_EPSILON * sum;
}

// The largest |x| of `values`.
double Largest(absl::Span<const float> values) {
  double largest = 0;
  for (float x : values) largest = std::max(largest, std::fabs(double{x}));
  return largest;
}

// The worst |gpu - cpu| / bound seen in a case, and where.
struct Worst {
  double share = 0;
  std::string where;
};

// Every |gpu[i] - cpu[i]| <= bound (NaN never passes); reports the first
// few elements that are not.
void ExpectWithin(absl::Span<const float> gpu, absl::Span<const float> cpu,
                  double bound, const std::string& what, Worst& worst) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const double error = std::fabs(double{gpu[i]} - double{cpu[i]});
    if (!(error <= bound)) {
      if (++reported <= 5) {
        ADD_FAILURE() << what << " element " << i << ": gpu " << gpu[i]
                      << ", cpu " << cpu[i] << ", |difference| " << error
                      << " over the bound " << bound;
      }
      continue;
    }
    if (error / bound > worst.share) {
      worst.share = error / bound;
      worst.where = absl::StrCat(what, " element ", i);
    }
  }
  if (reported > 5) {
    ADD_FAILURE() << what << ": " << reported << " elements over the bound";
  }
}

class GraphCudaTest : public ::testing::TestWithParam<Case> {};

TEST_P(GraphCudaTest, TrainingStepsAgreeWithTheCpu) {
  absl::StatusOr<std::unique_ptr<Device>> gpu =
      OpenCudaBackend(CudaBackendOptions());
  PSFLOW_SKIP_IF_ABSENT(gpu.status());
  ASSERT_OK(gpu.status());
  ASSERT_OK_AND_ASSIGN(const JobConfig job, GraphJob(GetParam()));
  StepDumpOptions options;
  options.batch.size = kBatch;
  options.steps = kSteps;
  ASSERT_OK_AND_ASSIGN(const StepDump cpu, RunGraphSteps(job, options));
  options.device = gpu->get();
  ASSERT_OK_AND_ASSIGN(const StepDump cuda, RunGraphSteps(job, options));
  ASSERT_OK_AND_ASSIGN(const GraphSpec spec,
                       BuildGraphSpec(cpu.graph, cpu.input));
  const double relative = RelativeBound(spec, kBatch);
  ASSERT_EQ(cuda.steps.size(), cpu.steps.size());
  ASSERT_EQ(cuda.variables.size(), cpu.variables.size());
  Worst worst;
  for (size_t s = 0; s < cpu.steps.size(); ++s) {
    SCOPED_TRACE(testing::Message() << "step " << s);
    const StepRecord& c = cpu.steps[s];
    const StepRecord& g = cuda.steps[s];
    const std::string step = absl::StrCat("step ", s, " ");
    // The logits' magnitude (at least 1: inputs and parameters are of
    // order 1), from the CPU's probabilities. The mean log loss moves by
    // at most a logit's error; a probability by at most a quarter of it
    // (sigmoid's largest slope).
    double logit = 1;
    for (float p : c.probabilities) {
      ASSERT_TRUE(p >= 0 && p <= 1) << "a CPU probability of " << p;
      const double q = std::clamp(double{p}, 1e-7, 1 - 1e-7);
      logit = std::max(logit, std::fabs(std::log(q / (1 - q))));
    }
    const float loss[] = {static_cast<float>(g.loss)};
    const float want[] = {static_cast<float>(c.loss)};
    ExpectWithin(loss, want, relative * logit, step + "loss", worst);
    ExpectWithin(g.probabilities, c.probabilities, relative * logit / 4,
                 step + "probabilities", worst);
    ASSERT_EQ(g.gradients.size(), c.gradients.size());
    for (size_t v = 0; v < c.gradients.size(); ++v) {
      const std::string what = step + cpu.variables[v].name();
      const double scale = Largest(c.gradients[v]);
      ASSERT_GT(scale, 0) << what << ": every gradient is 0 on the CPU";
      ExpectWithin(g.gradients[v], c.gradients[v], relative * scale, what,
                   worst);
    }
    ASSERT_EQ(g.row_gradients.size(), c.row_gradients.size());
    for (size_t t = 0; t < c.row_gradients.size(); ++t) {
      const std::string what = step + "rows of " + cpu.tables[t].name();
      const double scale = Largest(c.row_gradients[t]);
      ASSERT_GT(scale, 0) << what << ": every row gradient is 0 on the CPU";
      ExpectWithin(g.row_gradients[t], c.row_gradients[t], relative * scale,
                   what, worst);
    }
  }
  std::cout << "[ MARGIN   ] " << GetParam().name << ": bound " << relative
            << " of each array's largest value; worst " << worst.share
            << " of it (" << worst.where << ")" << std::endl;
}

INSTANTIATE_TEST_SUITE_P(Graphs, GraphCudaTest, ::testing::ValuesIn(AllCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace psflow
