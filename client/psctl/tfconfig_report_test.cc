#include "client/psctl/tfconfig_report.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

LoadedTfConfig Load(const char* json) {
  absl::StatusOr<LoadedTfConfig> loaded = LoadTfConfig(json, std::nullopt);
  EXPECT_OK(loaded);
  return *loaded;
}

TEST(TfConfigReportTest, KubeflowWorkerZeroIsReportedAsChief) {
  std::string report = FormatTfConfigReport(Load(
      R"({"cluster":{"evaluator":["j-evaluator-0.ns.svc:2222"],"ps":["j-ps-0.ns.svc:2222"],"worker":["j-worker-0.ns.svc:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"})"));
  EXPECT_THAT(report,
              HasSubstr("task:          worker 0 at j-worker-0.ns.svc:2222"));
  EXPECT_THAT(report, HasSubstr("acts as chief: yes (no \"chief\" job"));
  EXPECT_THAT(report, HasSubstr("environment:   cloud"));
  EXPECT_THAT(report, HasSubstr("0 chief, 1 ps, 1 worker, 1 evaluator"));
  EXPECT_THAT(report, HasSubstr("ps-0           j-ps-0.ns.svc:2222\n"));
  EXPECT_THAT(
      report,
      HasSubstr("worker-0       j-worker-0.ns.svc:2222   <- this task"));
  EXPECT_THAT(report, HasSubstr("evaluator-0    j-evaluator-0.ns.svc:2222\n"));
}

TEST(TfConfigReportTest, PsNamesTheChief) {
  std::string report = FormatTfConfigReport(Load(
      R"({"cluster":{"chief":["c:1"],"ps":["p:1"],"worker":["w:1"]},
          "task":{"type":"ps","index":0}})"));
  EXPECT_THAT(report, HasSubstr("acts as chief: no (the chief is chief-0)"));
  EXPECT_THAT(report, HasSubstr("rpc_layer:     grpc (default)"));
}

TEST(TfConfigReportTest, EvaluatorOutsideTheClusterHasNoAddress) {
  std::string report =
      FormatTfConfigReport(Load(R"({"cluster":{"ps":["p:1"],"worker":["w:1"]},
               "task":{"type":"evaluator","index":0}})"));
  EXPECT_THAT(report, HasSubstr("evaluator 0 at (not listed in \"cluster\")"));
  EXPECT_THAT(report, Not(HasSubstr("<- this task")));
}

TEST(TfConfigReportTest, WarningsArePrinted) {
  std::string report =
      FormatTfConfigReport(Load(R"({"cluster":{"ps":["p:1"],"worker":["w:1"]},
               "task":{"type":"ps","index":0},"job":{}})"));
  EXPECT_THAT(report,
              HasSubstr("warning: \"job\" is not a TF_CONFIG key; ignored"));
}

}  // namespace
}  // namespace psflow
