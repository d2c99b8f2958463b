#include "client/cluster_client.h"

#include <string>

#include "common/status_matchers.h"
#include "common/tf_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TfConfig Parse(const std::string& json) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(json);
  EXPECT_OK(config.status());
  return *config;
}

// What the chief's TF_CONFIG lists: ps a, b; workers w0, w1.
JobSpec ChiefsSpec() {
  JobSpec spec;
  spec.add_ps_addresses("a:1");
  spec.add_ps_addresses("b:1");
  spec.add_worker_addresses("w0:1");
  spec.add_worker_addresses("w1:1");
  return spec;
}

TEST(CheckSameClusterTest, TheChiefsClusterPasses) {
  EXPECT_OK(CheckSameCluster(
      Parse(R"({"cluster": {"ps": ["a:1", "b:1"], "worker": ["w0:1", "w1:1"]},
                "task": {"type": "worker", "index": 1}})"),
      ChiefsSpec()));
  // An evaluator need not list the workers.
  EXPECT_OK(CheckSameCluster(
      Parse(R"({"cluster": {"ps": ["a:1", "b:1"], "worker": ["w0:1"]},
                "task": {"type": "evaluator", "index": 0}})"),
      ChiefsSpec()));
  // A chief of an older release records no cluster: nothing to compare.
  EXPECT_OK(CheckSameCluster(
      Parse(R"({"cluster": {"ps": ["b:1"], "worker": ["w0:1", "w1:1"]},
                "task": {"type": "worker", "index": 1}})"),
      JobSpec()));
}

// Servers swapped (a worker would push every variable to the wrong
// server), missing, or workers that disagree (shards would overlap).
TEST(CheckSameClusterTest, AnotherClusterIsRefusedNamingBothLists) {
  EXPECT_THAT(
      CheckSameCluster(
          Parse(
              R"({"cluster": {"ps": ["b:1", "a:1"], "worker": ["w0:1", "w1:1"]},
                    "task": {"type": "worker", "index": 1}})"),
          ChiefsSpec()),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("lists the \"ps\" tasks [b:1, a:1], but the "
                               "chief's lists [a:1, b:1]"),
                     HasSubstr("fix this task's TF_CONFIG"))));
  EXPECT_THAT(
      CheckSameCluster(Parse(R"({"cluster": {"ps": ["a:1"], "worker": ["w0:1"]},
                    "task": {"type": "evaluator", "index": 0}})"),
                       ChiefsSpec()),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("[a:1]")));
  EXPECT_THAT(CheckSameCluster(Parse(R"({"cluster": {"ps": ["a:1", "b:1"],
                                "worker": ["w0:1", "w1:1", "w2:1"]},
                    "task": {"type": "worker", "index": 1}})"),
                               ChiefsSpec()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the \"worker\" tasks [w0:1, w1:1, w2:1]")));
}

}  // namespace
}  // namespace psflow
