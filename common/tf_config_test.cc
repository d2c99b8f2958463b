#include "common/tf_config.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

// ---- Forms that must parse ------------------------------------------------

// TensorFlow's ParameterServerStrategy documentation example.
TEST(TfConfigTest, ParsesTensorFlowParameterServerExample) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {
      "chief": ["host1:2222"],
      "worker": ["host2:2222", "host3:2222"],
      "ps": ["host4:2222", "host5:2222"]
    },
    "task": {"type": "worker", "index": 1}
  })"));
  EXPECT_EQ(config.task, (TaskId{TaskType::kWorker, 1}));
  EXPECT_EQ(config.cluster.NumTasks(TaskType::kChief), 1);
  EXPECT_EQ(config.cluster.NumTasks(TaskType::kPs), 2);
  EXPECT_EQ(config.cluster.NumTasks(TaskType::kWorker), 2);
  EXPECT_FALSE(config.cluster.HasJob(TaskType::kEvaluator));
  EXPECT_EQ(config.TaskAddress(), "host3:2222");
  EXPECT_EQ(config.ChiefTask(), (TaskId{TaskType::kChief, 0}));
  EXPECT_FALSE(config.IsChief());
  EXPECT_THAT(config.warnings, IsEmpty());
}

// tf.estimator's documented chief and evaluator TF_CONFIGs: the evaluator is
// not part of "cluster".
TEST(TfConfigTest, ParsesEstimatorChiefExample) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"chief": ["host0:2222"],
                "worker": ["host1:2222", "host2:2222", "host3:2222"],
                "ps": ["host4:2222", "host5:2222"]},
    "task": {"type": "chief", "index": 0}})"));
  EXPECT_TRUE(config.IsChief());
  EXPECT_EQ(config.TaskAddress(), "host0:2222");
}

TEST(TfConfigTest, AcceptsEvaluatorOutsideTheCluster) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"],
                "ps": ["host4:2222"]},
    "task": {"type": "evaluator", "index": 0}})"));
  EXPECT_EQ(config.task.type, TaskType::kEvaluator);
  EXPECT_EQ(config.TaskAddress(), std::nullopt);
  EXPECT_FALSE(config.IsChief());
}

// The string Kubeflow's TFJob generates, unchanged.
TEST(TfConfigTest, ParsesKubeflowTfJobStringWithoutChief) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig config,
      ParseTfConfig(
          R"({"cluster":{"evaluator":["j-evaluator-0.ns.svc:2222"],"ps":["j-ps-0.ns.svc:2222"],"worker":["j-worker-0.ns.svc:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"})"));
  EXPECT_EQ(config.task, (TaskId{TaskType::kWorker, 0}));
  EXPECT_EQ(config.environment, "cloud");
  EXPECT_EQ(config.TaskAddress(), "j-worker-0.ns.svc:2222");
  // No chief job: worker 0 runs the chief's duties (TF and TFJob semantics).
  EXPECT_EQ(config.ChiefTask(), (TaskId{TaskType::kWorker, 0}));
  EXPECT_TRUE(config.IsChief());
  EXPECT_EQ(config.cluster.Address({TaskType::kEvaluator, 0}),
            "j-evaluator-0.ns.svc:2222");
}

TEST(TfConfigTest, ParsesKubeflowTfJobStringForEachRole) {
  const std::string cluster =
      R"("cluster":{"chief":["mnist-chief-0.kubeflow.svc:2222"],"evaluator":["mnist-evaluator-0.kubeflow.svc:2222"],"ps":["mnist-ps-0.kubeflow.svc:2222","mnist-ps-1.kubeflow.svc:2222"],"worker":["mnist-worker-0.kubeflow.svc:2222","mnist-worker-1.kubeflow.svc:2222"]})";
  for (const char* task :
       {R"({"type":"chief","index":0})", R"({"type":"ps","index":1})",
        R"({"type":"worker","index":1})",
        R"({"type":"evaluator","index":0})"}) {
    SCOPED_TRACE(task);
    ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(absl::StrCat(
                                              "{", cluster, ",\"task\":", task,
                                              ",\"environment\":\"cloud\"}")));
    EXPECT_TRUE(config.TaskAddress().has_value());
    EXPECT_EQ(config.IsChief(), config.task.type == TaskType::kChief);
  }
}

TEST(TfConfigTest, AcceptsStringIndex) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"ps": ["p0:1"], "worker": ["w0:1", "w1:1"]},
    "task": {"type": "worker", "index": "1"}})"));
  EXPECT_EQ(config.task.index, 1);
}

TEST(TfConfigTest, MissingIndexDefaultsToZeroAsInTensorFlow) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
    "task": {"type": "ps"}})"));
  EXPECT_EQ(config.task, (TaskId{TaskType::kPs, 0}));
}

TEST(TfConfigTest, ParsesSparseJobs) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"chief": ["c0:2222"], "ps": ["p0:2222"],
                "worker": {"1": "w1:2222", "3": "w3:2222"}},
    "task": {"type": "worker", "index": 3}})"));
  EXPECT_TRUE(config.cluster.IsSparse(TaskType::kWorker));
  EXPECT_FALSE(config.cluster.IsSparse(TaskType::kPs));
  EXPECT_EQ(config.cluster.NumTasks(TaskType::kWorker), 2);
  EXPECT_EQ(config.TaskAddress(), "w3:2222");
  EXPECT_EQ(config.cluster.Address({TaskType::kWorker, 2}), std::nullopt);
}

TEST(TfConfigTest, AcceptsTheOptionalKeys) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
    "task": {"type": "worker", "index": 0, "trial": "7"},
    "rpc_layer": "grpc", "environment": "google",
    "session_master": "grpc://w0:1"})"));
  EXPECT_EQ(config.rpc_layer, "grpc");
  EXPECT_EQ(config.environment, "google");
  EXPECT_EQ(config.session_master, "grpc://w0:1");
  EXPECT_EQ(config.trial, "7");
  EXPECT_THAT(config.warnings, IsEmpty());
}

TEST(TfConfigTest, NumericTrialIsKept) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
    "task": {"type": "ps", "index": 0, "trial": 12}})"));
  EXPECT_EQ(config.trial, "12");
}

// Cloud ML Engine adds a "job" key with the job's arguments; TF ignores it.
TEST(TfConfigTest, UnknownKeysAreIgnoredWithAWarning) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"ps": ["p0:1"], "worker": ["w0:1"], "chief": []},
    "task": {"type": "ps", "index": 0, "color": "blue"},
    "job": {"args": ["--lr=0.1"]}})"));
  EXPECT_THAT(
      config.warnings,
      UnorderedElementsAre(HasSubstr("cluster.chief has no tasks"),
                           HasSubstr("task.color"), HasSubstr("\"job\"")));
  EXPECT_FALSE(config.cluster.HasJob(TaskType::kChief));
}

TEST(TfConfigTest, AcceptsIpv4AndBracketedIpv6Addresses) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"ps": ["[::1]:2222", "[fe80::1]:2222"],
                "worker": ["10.0.0.2:2222"]},
    "task": {"type": "ps", "index": 1}})"));
  EXPECT_EQ(config.TaskAddress(), "[fe80::1]:2222");
}

TEST(TfConfigTest, PortZeroIsAllowedInTheTasksOwnEntry) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"ps": ["127.0.0.1:0"], "worker": ["127.0.0.1:5000"]},
    "task": {"type": "ps", "index": 0}})"));
  EXPECT_EQ(config.TaskAddress(), "127.0.0.1:0");
}

TEST(TfConfigTest, ListsTasksInRoleOrder) {
  ASSERT_OK_AND_ASSIGN(TfConfig config, ParseTfConfig(R"({
    "cluster": {"worker": ["w0:1", "w1:1"], "ps": ["p0:1"],
                "evaluator": ["e0:1"], "chief": ["c0:1"]},
    "task": {"type": "ps", "index": 0}})"));
  EXPECT_THAT(config.cluster.Tasks(),
              ElementsAre(Pair(TaskId{TaskType::kChief, 0}, "c0:1"),
                          Pair(TaskId{TaskType::kPs, 0}, "p0:1"),
                          Pair(TaskId{TaskType::kWorker, 0}, "w0:1"),
                          Pair(TaskId{TaskType::kWorker, 1}, "w1:1"),
                          Pair(TaskId{TaskType::kEvaluator, 0}, "e0:1")));
}

// ---- Malformed documents --------------------------------------------------

// Asserts that `json` is rejected with InvalidArgument and every fragment
// in the message.
void ExpectRejected(const std::string& json,
                    std::initializer_list<const char*> fragments) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(json);
  ASSERT_THAT(config, StatusIs(kInvalid, StartsWith("TF_CONFIG")));
  for (const char* fragment : fragments) {
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(fragment));
  }
}

TEST(TfConfigTest, EmptyStringIsRejected) {
  ExpectRejected("  ", {"is empty", "{\"cluster\""});
}

TEST(TfConfigTest, InvalidJsonIsRejected) {
  ExpectRejected("{'cluster': {}}",
                 {"is not valid JSON: line 1, column 2", "double quotes"});
}

TEST(TfConfigTest, TopLevelListIsRejected) {
  ExpectRejected("[1, 2]", {"is a list", "must be a JSON object"});
}

TEST(TfConfigTest, DuplicateJobIsRejected) {
  ExpectRejected(R"({"cluster": {"ps": ["p0:1"], "ps": ["p1:1"]}})",
                 {"duplicate key \"ps\""});
}

TEST(TfConfigTest, ClusterThatIsNotAnObjectIsRejected) {
  ExpectRejected(R"({"cluster": ["w0:1"], "task": {"type": "worker"}})",
                 {"\"cluster\" is a list", "must map job names"});
}

TEST(TfConfigTest, JobThatIsNotAListIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": "p0:1", "worker": ["w0:1"]},
          "task": {"type": "worker"}})",
      {"cluster.ps is the string \"p0:1\"", "list of \"host:port\" strings"});
}

TEST(TfConfigTest, AddressThatIsNotAStringIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1", 2222], "worker": ["w0:1"]},
          "task": {"type": "worker"}})",
      {"cluster.ps[1] is the number 2222", "\"host:port\" string"});
}

TEST(TfConfigTest, UnknownJobNameIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"], "trainer": ["t:1"]},
          "task": {"type": "worker"}})",
      {"\"trainer\" is not a job psflow runs",
       "use chief, ps, worker or evaluator"});
}

TEST(TfConfigTest, MasterJobNameIsRejectedWithAHint) {
  ExpectRejected(
      R"({"cluster": {"master": ["m:1"], "ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"type": "worker"}})",
      {"\"master\"", "called \"chief\" now"});
}

TEST(TfConfigTest, CapitalizedTaskTypeIsRejectedWithAHint) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"type": "Worker", "index": 0}})",
      {"task.type \"Worker\"", "lower case"});
}

TEST(TfConfigTest, MissingTaskIsRejected) {
  ExpectRejected(R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]}})",
                 {"has no \"task\"", "\"type\": \"worker\""});
}

TEST(TfConfigTest, TaskThatIsNotAnObjectIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]}, "task": "worker"})",
      {"\"task\" is the string \"worker\"", "must be an object"});
}

TEST(TfConfigTest, MissingTaskTypeIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"index": 0}})",
      {"task.type is missing"});
}

TEST(TfConfigTest, NonStringTaskTypeIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"type": 1, "index": 0}})",
      {"task.type is the number 1"});
}

TEST(TfConfigTest, NegativeIndexIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": -1}})",
      {"task.index is the number -1", "whole number"});
}

TEST(TfConfigTest, FractionalIndexIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0.5}})",
      {"task.index is the number 0.5"});
}

TEST(TfConfigTest, NonNumericStringIndexIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": "one"}})",
      {"task.index is the string \"one\""});
}

TEST(TfConfigTest, IndexOutOfRangeIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1", "w1:1"]},
          "task": {"type": "worker", "index": 3}})",
      {"task.index 3 is out of range for job \"worker\" (2 tasks); use 0..1"});
}

TEST(TfConfigTest, IndexMissingFromASparseJobIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": {"0": "w0:1", "3": "w3:1"}},
          "task": {"type": "worker", "index": 1}})",
      {"task.index 1 is out of range", "use one of 0, 3"});
}

TEST(TfConfigTest, SparseJobWithABadIndexIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": {"x": "w0:1"}},
          "task": {"type": "ps", "index": 0}})",
      {"task index in cluster.worker is the string \"x\""});
}

TEST(TfConfigTest, SparseJobNamingAnIndexTwiceIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": {"1": "w1:1", "01": "w2:1"}},
          "task": {"type": "ps", "index": 0}})",
      {"cluster.worker lists task index 1 twice"});
}

TEST(TfConfigTest, TaskTypeWithoutAJobIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"type": "chief", "index": 0}})",
      {"task.type is \"chief\" but \"cluster\" has no \"chief\" job"});
}

TEST(TfConfigTest, TwoChiefsAreRejected) {
  ExpectRejected(
      R"({"cluster": {"chief": ["c0:1", "c1:1"], "ps": ["p0:1"],
                      "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0}})",
      {"cluster.chief has 2 tasks", "at most one chief"});
}

TEST(TfConfigTest, TwoEvaluatorsAreRejected) {
  ExpectRejected(
      R"({"cluster": {"evaluator": ["e0:1", "e1:1"], "ps": ["p0:1"],
                      "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0}})",
      {"cluster.evaluator has 2 tasks", "at most one evaluator"});
}

// TensorFlow's MultiWorkerMirroredStrategy example has no ps: psflow is a
// parameter server and says so rather than hanging.
TEST(TfConfigTest, TrainingWithoutPsIsRejected) {
  ExpectRejected(
      R"({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
          "task": {"type": "worker", "index": 0}})",
      {"has no \"ps\" tasks", "at least one ps and one worker",
       "\"ps\": [\"ps-0.example.com:2222\"]"});
}

TEST(TfConfigTest, TrainingWithoutWorkersIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "chief": ["c0:1"]},
          "task": {"type": "ps", "index": 0}})",
      {"has no \"worker\" tasks"});
}

// Every training task talks to the chief: chief 0, or worker 0 without a
// "chief" job. A sparse worker job without index 0 leaves the job leaderless.
TEST(TfConfigTest, ATrainingClusterWithoutAChiefIsRejected) {
  for (const char* type : {"worker", "ps"}) {
    ExpectRejected(
        absl::StrCat(R"({"cluster": {"ps": ["p0:1"], "worker": {"1": "w1:2"}},
                         "task": {"type": ")",
                     type, R"(", "index": )",
                     std::string(type) == "ps" ? "0" : "1", "}}"),
        {"no \"chief\" task and no worker with index 0",
         "add a \"chief\" task"});
  }
}

// An evaluator's TF_CONFIG may leave the cluster out (TF allows it); what
// needs the chief asks for its address and gets the reason, not a crash.
TEST(TfConfigTest, ChiefAddressNamesAMissingChief) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig alone,
      ParseTfConfig(R"({"task": {"type": "evaluator", "index": 0}})"));
  EXPECT_THAT(alone.ChiefAddress(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("TF_CONFIG names no chief")));
  ASSERT_OK_AND_ASSIGN(TfConfig led, ParseTfConfig(R"({
    "cluster": {"ps": ["p0:1"], "worker": ["w0:1", "w1:1"]},
    "task": {"type": "evaluator", "index": 0}})"));
  EXPECT_THAT(led.ChiefAddress(), IsOkAndHolds("w0:1"));
}

TEST(TfConfigTest, EvaluatorNeedsNoTrainingJobs) {
  EXPECT_OK(ParseTfConfig(R"({"task": {"type": "evaluator", "index": 0}})"));
}

TEST(TfConfigTest, DuplicateAddressesAreRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["h:2222"], "worker": ["w0:2222", "h:2222"]},
          "task": {"type": "worker", "index": 0}})",
      {"cluster.worker[1] and cluster.ps[0] share address \"h:2222\"",
       "own host:port"});
}

TEST(TfConfigTest, DuplicateAddressesDifferingInHostCaseAreRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["Host-A:2222"], "worker": ["host-a:2222"]},
          "task": {"type": "ps", "index": 0}})",
      {"share address"});
}

TEST(TfConfigTest, AddressWithoutPortIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0}})",
      {"cluster.ps[0] \"p0\" has no port", "\"p0:2222\""});
}

TEST(TfConfigTest, NonNumericPortIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:port"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0}})",
      {"cluster.ps[0] \"p0:port\" has port \"port\", which is not a number"});
}

TEST(TfConfigTest, PortOutOfRangeIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:70000"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0}})",
      {"port 70000, which is out of range; use 1-65535"});
}

TEST(TfConfigTest, EmptyHostIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": [":2222"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0}})",
      {"cluster.ps[0] \":2222\" has an empty host"});
}

TEST(TfConfigTest, EmptyAddressIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": [""], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0}})",
      {"cluster.ps[0] \"\" is empty"});
}

TEST(TfConfigTest, AddressWithSchemeIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["grpc://p0:2222"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0}})",
      {"has a URL scheme", "rpc_layer"});
}

TEST(TfConfigTest, PortZeroForAPeerIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["127.0.0.1:0"], "worker": ["127.0.0.1:5000"]},
          "task": {"type": "worker", "index": 0}})",
      {"cluster.ps[0] \"127.0.0.1:0\" has port 0, which peers cannot dial"});
}

TEST(TfConfigTest, UnsupportedRpcLayerIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0}, "rpc_layer": "grpc+verbs"})",
      {"rpc_layer \"grpc+verbs\" is not supported", "use \"grpc\""});
}

TEST(TfConfigTest, NonStringEnvironmentIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0}, "environment": 3})",
      {"environment is the number 3", "must be a string"});
}

TEST(TfConfigTest, NonScalarTrialIsRejected) {
  ExpectRejected(
      R"({"cluster": {"ps": ["p0:1"], "worker": ["w0:1"]},
          "task": {"type": "worker", "index": 0, "trial": [1]}})",
      {"task.trial is a list"});
}

}  // namespace
}  // namespace psflow
