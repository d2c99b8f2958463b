// ctr_ceiling: how much of a planted click-through-rate model can be
// learned from its training set. The planted model's own test AUC (what
// `psctl data synth-ctr` prints) is the best any model can do with
// unlimited data; with a finite training set, an id seen n times has its
// weight estimated from n noisy clicks, and an id never seen cannot be
// learned at all. This tool scores the test set with the planted model
// restricted to what the training set shows:
//
//   seen >= k:   an id's weight kept only when it occurs at least k times in
//                training (0 otherwise, the prior mean);
//   shrunk c:    each id's weight times n / (n + c), the shape of a
//                posterior mean from n observations (c = prior strength).
//   estimated:   each id's weight as a learner could at best estimate it
//                from its own training examples, the other weights known:
//                the Gaussian posterior mean given the Fisher information
//                I = sum over its examples of p (1 - p) (planted p) and the
//                prior N(0, weight_scale^2), from the planted weight plus
//                noise N(0, 1 / I) drawn by hashing the id (the "MLE"
//                row: that noisy weight unshrunk). Optimistic: a real
//                learner also estimates the other weights and the dense
//                part.
//
// These are ceilings for a model trained on that data, not exact bounds;
// they tell a learning gap from a data gap.
//
//   bazel build --config=opt //bench:ctr_ceiling
//   bazel-bin/bench/ctr_ceiling --data_dir=/tmp/psflow-data/ctr_2m
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/binary_metrics.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/splitmix64.h"
#include "data/criteo.h"
#include "data/planted_ctr_model.h"

ABSL_FLAG(std::string, data_dir, "/tmp/psflow-data/ctr_2m",
          "A data set written by psctl data synth-ctr (planted.json, "
          "train.txt, test.txt)");

namespace psflow {
namespace {

int Run() {
  const std::string dir = absl::GetFlag(FLAGS_data_dir);
  absl::StatusOr<std::string> text =
      ReadFileToString(dir + "/planted.json", 1 << 20);
  if (!text.ok()) {
    std::fprintf(stderr, "%s\n", std::string(text.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<JsonValue> planted = ParseJson(*text);
  if (!planted.ok()) {
    std::fprintf(stderr, "planted.json: %s\n",
                 std::string(planted.status().message()).c_str());
    return 1;
  }
  const JsonValue* options = planted->Find("options");
  const JsonValue* bias = planted->Find("bias");
  if (options == nullptr || bias == nullptr ||
      options->Find("seed") == nullptr ||
      options->Find("weight_scale") == nullptr ||
      options->Find("dense") == nullptr || options->Find("fields") == nullptr) {
    std::fprintf(stderr,
                 "planted.json lacks options.seed/weight_scale/dense/"
                 "fields or bias\n");
    return 1;
  }
  const int num_dense =
      static_cast<int>(options->Find("dense")->number_value());
  const int num_fields =
      static_cast<int>(options->Find("fields")->number_value());
  const PlantedCtrModel model(
      static_cast<uint64_t>(options->Find("seed")->number_value()), num_dense,
      options->Find("weight_scale")->number_value(), bias->number_value());
  const CriteoFormat format = CriteoFormatOf(num_dense, num_fields);
  const std::string suffix = planted->Find("train") != nullptr
                                 ? planted->Find("train")->string_value()
                                 : "train.txt";
  absl::StatusOr<CtrExamples> train =
      LoadCriteoFile(dir + "/" + suffix, format);
  absl::StatusOr<CtrExamples> test =
      LoadCriteoFile(dir + "/" +
                         (planted->Find("test") != nullptr
                              ? planted->Find("test")->string_value()
                              : "test.txt"),
                     format);
  if (!train.ok() || !test.ok()) {
    std::fprintf(
        stderr, "%s\n",
        std::string((train.ok() ? test.status() : train.status()).message())
            .c_str());
    return 1;
  }
  absl::flat_hash_map<int64_t, int32_t> counts;
  counts.reserve(train->ids.size() / 4);
  for (int64_t id : train->ids) ++counts[id];
  // Each training id's Fisher information about its weight.
  absl::flat_hash_map<int64_t, double> information;
  information.reserve(counts.size());
  for (int64_t e = 0; e < train->num_examples; ++e) {
    const double p = model.Probability(train->DenseOf(e), train->IdsOf(e));
    for (int64_t id : train->IdsOf(e)) information[id] += p * (1 - p);
  }
  const double prior_precision =
      1.0 / (options->Find("weight_scale")->number_value() *
             options->Find("weight_scale")->number_value());
  // The planted weight plus the noise of an estimate from information
  // `info`; 0 for an unseen id.
  auto noisy = [&information](int64_t id, double w) {
    auto it = information.find(id);
    if (it == information.end()) return 0.0;
    const double noise =
        StandardNormalFromHash(
            SplitMix64Mix(static_cast<uint64_t>(id) ^ 0x243f6a8885a308d3ull)) /
        std::sqrt(it->second);
    return w + noise;
  };

  // A scorer per row: the weight it gives an id seen n times.
  struct Row {
    std::string name;
    std::function<double(int64_t id, double weight, int32_t n)> weight;
  };
  std::vector<Row> rows = {
      {"planted (all weights)", [](int64_t, double w, int32_t) { return w; }}};
  for (int k : {1, 2, 5, 10, 50}) {
    rows.push_back(
        {"seen >= " + std::to_string(k),
         [k](int64_t, double w, int32_t n) { return n >= k ? w : 0.0; }});
  }
  for (double c : {1.0, 4.0, 16.0}) {
    char name[32];
    std::snprintf(name, sizeof(name), "shrunk c = %g", c);
    rows.push_back(
        {name, [c](int64_t, double w, int32_t n) { return w * n / (n + c); }});
  }
  rows.push_back({"estimated: MLE (noisy, unshrunk)",
                  [&](int64_t id, double w, int32_t) { return noisy(id, w); }});
  rows.push_back(
      {"estimated: posterior mean", [&](int64_t id, double w, int32_t) {
         auto it = information.find(id);
         if (it == information.end()) return 0.0;
         return noisy(id, w) * it->second / (it->second + prior_precision);
       }});
  std::printf("test examples %lld, distinct training ids %zu\n\n",
              static_cast<long long>(test->num_examples), counts.size());
  std::printf("| planted model restricted to | test AUC | test log loss |\n");
  std::printf("|---|---:|---:|\n");
  for (const Row& row : rows) {
    std::vector<float> probabilities(test->num_examples);
    for (int64_t e = 0; e < test->num_examples; ++e) {
      // The dense part and bias as planted; each id's weight as the row says.
      double logit = model.Logit(test->DenseOf(e), {});
      for (int64_t id : test->IdsOf(e)) {
        auto it = counts.find(id);
        logit += row.weight(id, model.CategoricalWeight(id),
                            it == counts.end() ? 0 : it->second);
      }
      probabilities[e] = static_cast<float>(PlantedCtrModel::Sigmoid(logit));
    }
    BinaryMetrics metrics;
    if (absl::Status added = metrics.Add(probabilities, test->labels);
        !added.ok()) {
      std::fprintf(stderr, "%s\n", std::string(added.message()).c_str());
      return 1;
    }
    absl::StatusOr<double> auc = metrics.Auc();
    std::printf("| %s | %.4f | %.4f |\n", row.name.c_str(),
                auc.ok() ? *auc : std::nan(""), metrics.LogLoss());
  }
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return psflow::Run();
}
