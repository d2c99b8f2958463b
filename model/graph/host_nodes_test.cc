// Which nodes run on the host (host_nodes.h), and the pooling and
// scattering they do there, on a small hand-made batch.
#include "model/graph/host_nodes.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;

GraphSpec Spec(const std::string& json) {
  GraphConfig config;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &config).ok());
  absl::StatusOr<GraphSpec> spec = BuildGraphSpec(config, InputSpec{{2}, 2, 2});
  EXPECT_OK(spec.status());
  return spec.ok() ? *std::move(spec) : GraphSpec();
}

// Inputs: dense [2], A (field 0, sum) and B (field 1, mean), both [2] in
// one table, and L (field 0) [1] in another.
constexpr char kInputs[] = R"("inputs": [
    {"name": "dense", "features": {}},
    {"name": "A", "categorical": {"field": 0, "table": "t", "dim": 2}},
    {"name": "B", "categorical": {"field": 1, "table": "t", "dim": 2,
                                  "pooling": "mean"}},
    {"name": "L", "categorical": {"field": 0, "table": "lin", "dim": 1}}],)";

TEST(HostNodesTest, JoinsAndSumsOfInputsReadOnceRunOnTheHost) {
  const GraphSpec spec = Spec(absl::StrCat("{", kInputs, R"(
    "nodes": [
      {"name": "deep", "inputs": ["A", "B", "dense"], "layer": {"Concatenate": {}}},
      {"name": "top", "inputs": ["deep"], "layer": {"Dense": {"units": 1}}},
      {"name": "wide", "inputs": ["L", "L"], "layer": {"Add": {}}},
      {"name": "logit", "inputs": ["top", "wide"], "layer": {"Add": {}}}],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}})"));
  const HostNodes host(spec);
  ASSERT_EQ(spec.nodes.size(), 4u);
  EXPECT_TRUE(host.on_host(0));   // deep: A, B and the features
  EXPECT_FALSE(host.on_host(1));  // a Dense layer
  EXPECT_FALSE(host.on_host(2));  // reads L twice: L's gradient gathers
  EXPECT_FALSE(host.on_host(3));  // reads nodes
  EXPECT_TRUE(host.fused(1));
  EXPECT_TRUE(host.fused(2));
  EXPECT_FALSE(host.fused(3));
}

TEST(HostNodesTest, AnInputOtherNodesReadStaysOnTheDevice) {
  const GraphSpec spec = Spec(absl::StrCat("{", kInputs, R"(
    "nodes": [
      {"name": "deep", "inputs": ["A", "B"], "layer": {"Concatenate": {}}},
      {"name": "top", "inputs": ["deep"], "layer": {"Dense": {"units": 1}}},
      {"name": "fm", "inputs": ["A", "B"], "layer": {"FactorizationMachine": {}}},
      {"name": "lin", "inputs": ["L", "dense"], "layer": {"Concatenate": {}}},
      {"name": "wide", "inputs": ["lin"], "layer": {"Dense": {"units": 1}}},
      {"name": "logit", "inputs": ["top", "fm", "wide"], "layer": {"Add": {}}}],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}})"));
  const HostNodes host(spec);
  EXPECT_FALSE(host.on_host(0));  // A and B also feed the FM
  EXPECT_FALSE(host.fused(1));
  EXPECT_TRUE(host.on_host(3));  // L once, and the features
  EXPECT_TRUE(host.fused(3));
}

TEST(HostNodesTest, PoolsAndScattersEachExamplesBags) {
  const GraphSpec spec = Spec(absl::StrCat("{", kInputs, R"(
    "nodes": [
      {"name": "deep", "inputs": ["A", "B", "dense"], "layer": {"Concatenate": {}}},
      {"name": "top", "inputs": ["deep"], "layer": {"Dense": {"units": 1}}},
      {"name": "logit", "inputs": ["top", "L"], "layer": {"Add": {}}}],
    "output": {"node": "logit", "loss": "SIGMOID_CROSS_ENTROPY"}})"));
  // Two examples. Example 0: A = {row 0}, B = {rows 1, 2}; example 1:
  // A = {}, B = {row 0}.
  const std::vector<int64_t> offsets = {0, 1, 3, 3, 4};
  const std::vector<int64_t> ids = {10, 11, 12, 10};
  const std::vector<int32_t> slots = {0, 1, 2, 0};
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6};
  std::vector<float> row_gradients(6), lin(3), lin_gradients(3);
  SparseBatch sparse;
  sparse.num_fields = 2;
  sparse.offsets = offsets;
  sparse.ids = ids;
  sparse.slots = slots;
  sparse.num_unique = 3;
  sparse.rows = {rows, lin};
  sparse.row_gradients = {absl::MakeSpan(row_gradients),
                          absl::MakeSpan(lin_gradients)};
  const std::vector<float> dense = {7, 8, 9, 10};
  const std::vector<int32_t> labels = {0, 1};
  ExampleBatch batch{2, dense, labels, 0, &sparse};

  const HostNodes host(spec);
  ASSERT_TRUE(host.on_host(0));
  std::vector<float> out(2 * 6);
  ASSERT_OK(host.Forward(spec, 0, batch, absl::MakeSpan(out)));
  // A (sum), B (mean), dense.
  EXPECT_THAT(out, ElementsAre(1, 2, 4, 5, 7, 8,  //
                               0, 0, 1, 2, 9, 10));
  const std::vector<float> dy = {1, 1, 1, 1, 0, 0,  //
                                 5, 5, 2, 2, 0, 0};
  host.Backward(spec, 0, batch, dy);
  // Row 0: A of example 0 (1) and B of example 1 (2); rows 1 and 2: half
  // of B of example 0 each. Example 1's empty A gives nothing.
  EXPECT_THAT(row_gradients, ElementsAre(3, 3, 0.5, 0.5, 0.5, 0.5));
}

}  // namespace
}  // namespace psflow
