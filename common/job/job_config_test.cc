#include "common/job/job_config.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kMinimal[] = R"({
  "model": {"softmax_regression": {}},
  "optimizer": {"kind": "SGD"},
  "learning_rate": {"learning_rate": 0.1},
  "data": {"train_images": "a.gz", "train_labels": "b.gz"},
  "training": {"batch_size": 32, "steps": 100, "mode": "ASYNC"}
})";

std::string DefaultJobPath() {
  return std::string(std::getenv("TEST_SRCDIR")) +
         "/psflow/configs/fashion_mnist_mlp.json";
}

// kMinimal with `field` (a JSON fragment inside "training") replaced.
absl::StatusOr<JobConfig> WithTraining(const std::string& training) {
  std::string json = kMinimal;
  const std::string old =
      R"("training": {"batch_size": 32, "steps": 100, "mode": "ASYNC"})";
  json.replace(json.find(old), old.size(), "\"training\": " + training);
  return ParseJobConfig(json, "test.json");
}

TEST(JobConfigTest, TheDefaultJobIsValid) {
  ASSERT_OK_AND_ASSIGN(JobConfig config, LoadJobConfigFile(DefaultJobPath()));
  EXPECT_EQ(config.name(), "fashion_mnist_mlp");
  EXPECT_TRUE(config.model().has_mlp());
  EXPECT_EQ(config.training().mode(), ASYNC);
  EXPECT_THAT(JobConfigSummary(config), HasSubstr("mlp {hidden_sizes: 256"));
}

TEST(JobConfigTest, TheConvnetJobIsValid) {
  ASSERT_OK_AND_ASSIGN(
      JobConfig config,
      LoadJobConfigFile(std::string(std::getenv("TEST_SRCDIR")) +
                        "/psflow/configs/fashion_mnist_convnet.json"));
  EXPECT_EQ(config.name(), "fashion_mnist_convnet");
  ASSERT_EQ(config.model().layers_size(), 14);
  EXPECT_EQ(config.model().layers(1).conv2d().filters(), 12);
  EXPECT_FALSE(config.model().layers(1).conv2d().use_bias());
  EXPECT_FALSE(config.model().layers(2).batch_normalization().scale());
}

TEST(JobConfigTest, DefaultsAreFilled) {
  ASSERT_OK_AND_ASSIGN(JobConfig config, ParseJobConfig(kMinimal, "t.json"));
  EXPECT_EQ(config.name(), "run");
  EXPECT_EQ(config.logging().log_every_steps(), 100);
  EXPECT_EQ(config.evaluation().every_secs(), 10);
  EXPECT_EQ(config.training().cpu_threads(), 1);
  EXPECT_EQ(config.training().split_threshold_bytes(), 1 << 20);
}

TEST(JobConfigTest, CamelCaseFieldNamesAreAcceptedToo) {
  std::string json = kMinimal;
  json.replace(json.find("batch_size"), 10, "batchSize");
  EXPECT_OK(ParseJobConfig(json, "t.json"));
}

TEST(JobConfigTest, ASchemaKeyForEditorsIsAcceptedAndIgnored) {
  std::string json = kMinimal;
  json.replace(0, 1, R"({"$schema": "../configs/job_config.schema.json",)");
  ASSERT_OK_AND_ASSIGN(JobConfig config, ParseJobConfig(json, "t.json"));
  EXPECT_EQ(config.json_schema(), "../configs/job_config.schema.json");
  // Only at the top: elsewhere it is an unknown field like any other.
  json = kMinimal;
  json.replace(json.find("\"kind\""), 0, R"("$schema": "x", )");
  EXPECT_THAT(
      ParseJobConfig(json, "t.json"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("$schema")));
}

TEST(JobConfigTest, UnknownFieldsAreRejectedByName) {
  std::string json = kMinimal;
  json.replace(json.find("\"model\""), 7, "\"modle\"");
  EXPECT_THAT(
      ParseJobConfig(json, "bad.json"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("job config bad.json"), HasSubstr("modle"))));
}

TEST(JobConfigTest, AKeyGivenTwiceIsRefusedNotTakenSilently) {
  EXPECT_THAT(
      WithTraining(R"({"batch_size": 32, "steps": 100, "batch_size": 64})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("test.json"),
                     HasSubstr("duplicate key \"batch_size\""))));
}

// Protobuf's JSON reader takes "batch_size" and "batchSize" for one field
// and keeps the last: 70000 here, past every check on the text's keys.
TEST(JobConfigTest, AFieldGivenUnderBothSpellingsIsRefused) {
  EXPECT_THAT(
      WithTraining(R"({"batch_size": 64, "steps": 100, "mode": "ASYNC",)"
                   R"( "batchSize": 70000})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("test.json"),
                     HasSubstr("training.batch_size is set twice, as "
                               "\"batch_size\" and as \"batchSize\""))));
  // At the top level: a message field under both names.
  std::string json = kMinimal;
  json.replace(0, 1, R"({"learningRate": {"learning_rate": 5},)");
  EXPECT_THAT(ParseJobConfig(json, "t.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("learning_rate is set twice, as "
                                 "\"learningRate\" and as "
                                 "\"learning_rate\"")));
  // Nested: learning_rate.learning_rate.
  json = kMinimal;
  json.replace(json.find("\"learning_rate\": 0.1"), 20,
               R"("learning_rate": 0.001, "learningRate": 5)");
  EXPECT_THAT(ParseJobConfig(json, "t.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("learning_rate.learning_rate is set twice, "
                                 "as \"learning_rate\" and as "
                                 "\"learningRate\"")));
  // Inside a list of messages, under a custom JSON name ("Dense").
  json = kMinimal;
  json.replace(json.find(R"({"softmax_regression": {}})"), 26,
               R"({"layers": [{"Flatten": {}},)"
               R"( {"Dense": {"units": 10}, "dense": {"units": 99}}]})");
  EXPECT_THAT(ParseJobConfig(json, "t.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.layers[1].dense is set twice, as "
                                 "\"Dense\" and as \"dense\"")));
  // Each spelling alone is still fine.
  json = kMinimal;
  json.replace(json.find("\"learning_rate\": 0.1"), 20,
               R"("learningRate": 0.25)");
  ASSERT_OK_AND_ASSIGN(JobConfig config, ParseJobConfig(json, "t.json"));
  EXPECT_EQ(config.learning_rate().learning_rate(), 0.25);
}

TEST(JobConfigTest, ANameThatWouldBeAPathIsRefusedWithTheRule) {
  for (const char* name : {"..", ".", "a/b", "x\\ny", "/abs"}) {
    std::string json = kMinimal;
    json.replace(json.find('{') + 1, 0,
                 absl::StrCat("\"name\": \"", name, "\","));
    EXPECT_THAT(
        ParseJobConfig(json, "test.json"),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 AllOf(HasSubstr("name"), HasSubstr("letters, digits"))))
        << name;
  }
}

TEST(JobConfigTest, ARunGroupIsAFolderAboveTheJobs) {
  ASSERT_OK_AND_ASSIGN(JobConfig config, ParseJobConfig(kMinimal, "t.json"));
  config.set_name("trial-3");
  EXPECT_EQ(MetricsDir(config, "/logs", "worker-1"), "/logs/trial-3/worker-1");
  config.mutable_logging()->set_run_group("sweep_lr");
  EXPECT_EQ(MetricsDir(config, "/logs", "worker-1"),
            "/logs/sweep_lr/trial-3/worker-1");
  for (const char* group : {"..", "a/b", "/abs"}) {
    std::string json = kMinimal;
    json.replace(
        json.find('{') + 1, 0,
        absl::StrCat("\"logging\": {\"run_group\": \"", group, "\"},"));
    EXPECT_THAT(ParseJobConfig(json, "test.json"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("logging.run_group"),
                               HasSubstr("letters, digits"))))
        << group;
  }
}

TEST(JobConfigTest, MissingModelIsRejected) {
  std::string json = kMinimal;
  json.replace(json.find("{\"softmax_regression\": {}}"), 26, "{}");
  EXPECT_THAT(ParseJobConfig(json, "t.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model is missing")));
}

TEST(JobConfigTest, BadOptimizerIsRejectedByField) {
  std::string json = kMinimal;
  json.replace(json.find("\"SGD\""), 5, "\"ADAM\", \"beta1\": 1.5");
  EXPECT_THAT(
      ParseJobConfig(json, "t.json"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("beta1 is 1.5")));
}

constexpr char kWideDeep[] = R"({
  "model": {"wide_deep": {"linear": LINEAR}},
  "optimizer": {"kind": "ADAGRAD"},
  "learning_rate": {"learning_rate": 0.05},
  "data": {"format": "CRITEO", "train_path": "train.txt"},
  "training": {"batch_size": 32, "epochs": 1, "mode": "ASYNC"}
})";

// kWideDeep with the `linear` table's settings `linear` (JSON).
absl::StatusOr<JobConfig> WideDeepWithLinear(const std::string& linear) {
  std::string json = kWideDeep;
  json.replace(json.find("LINEAR"), 6, linear);
  return ParseJobConfig(json, "t.json");
}

TEST(JobConfigTest, ATableMayHaveItsOwnLearningRate) {
  ASSERT_OK_AND_ASSIGN(
      JobConfig config,
      WideDeepWithLinear(R"({"learning_rate": {"kind": "EXPONENTIAL_DECAY",
          "learning_rate": 2.5, "decay_steps": 1000, "decay_rate": 0.5}})"));
  const EmbeddingTableSpec& linear = config.model().wide_deep().linear();
  ASSERT_TRUE(linear.has_learning_rate());
  EXPECT_EQ(linear.learning_rate().learning_rate(), 2.5);
  EXPECT_EQ(linear.learning_rate().decay_steps(), 1000);
  // Unset: the table follows the job's rate.
  EXPECT_FALSE(config.model().wide_deep().embedding().has_learning_rate());
}

TEST(JobConfigTest, BadTableLearningRateIsRejectedByTableAndField) {
  EXPECT_THAT(WideDeepWithLinear(R"({"learning_rate": {"learning_rate": 0}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model.wide_deep.linear: "),
                             HasSubstr("learning_rate is 0"),
                             HasSubstr("use a positive"))));
  EXPECT_THAT(WideDeepWithLinear(R"({"learning_rate": {"learning_rate": 1,
          "kind": "COSINE_DECAY"}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model.wide_deep.linear: "),
                             HasSubstr("decay_steps is 0"))));
}

TEST(JobConfigTest, BadTableOptimizerIsRejectedByTableAndField) {
  EXPECT_THAT(
      WideDeepWithLinear(R"({"optimizer": {"kind": "FTRL", "l2": -1}})"),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          AllOf(HasSubstr("model.wide_deep.linear: "), HasSubstr("l2 is -1"))));
}

TEST(JobConfigTest, StalenessAwareLearningRateIsForAsyncAndBoundedOnly) {
  EXPECT_OK(WithTraining(
      R"({"batch_size": 8, "steps": 5, "mode": "ASYNC",
          "staleness_aware_learning_rate": true})"));
  EXPECT_OK(WithTraining(
      R"({"batch_size": 8, "steps": 5, "mode": "BOUNDED", "max_staleness": 2,
          "staleness_aware_learning_rate": true})"));
  EXPECT_THAT(
      WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "SYNC",
                       "staleness_aware_learning_rate": true})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("training.staleness_aware_learning_rate applies to "
                         "ASYNC and BOUNDED training only")));
}

TEST(JobConfigTest, ParameterPrefetchIsForAsyncAndBoundedModes) {
  ASSERT_OK_AND_ASSIGN(
      JobConfig never,
      WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "ASYNC",
                       "parameter_prefetch": "NEVER"})"));
  EXPECT_EQ(never.training().parameter_prefetch(), TrainingConfig::NEVER);
  EXPECT_OK(WithTraining(
      R"({"batch_size": 8, "steps": 5, "mode": "BOUNDED", "max_staleness": 2,
          "parameter_prefetch": "ALWAYS"})"));
  EXPECT_OK(WithTraining(
      R"({"batch_size": 8, "steps": 5, "mode": "SYNC",
          "parameter_prefetch": "AUTO"})"));
  EXPECT_THAT(
      WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "SYNC",
                       "parameter_prefetch": "ALWAYS"})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("training.parameter_prefetch applies to ASYNC and "
                         "BOUNDED training only")));
}

TEST(JobConfigTest, SyncGroupBytesIsForSyncModeAndNotNegative) {
  ASSERT_OK_AND_ASSIGN(
      JobConfig grouped,
      WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "SYNC",
                       "sync_group_bytes": 65536})"));
  EXPECT_EQ(grouped.training().sync_group_bytes(), 65536);
  ASSERT_OK_AND_ASSIGN(
      JobConfig unset,
      WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "SYNC"})"));
  EXPECT_FALSE(unset.training().has_sync_group_bytes());
  EXPECT_OK(WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "SYNC",
                             "sync_group_bytes": 0})"));
  EXPECT_THAT(WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "SYNC",
                       "sync_group_bytes": -1})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("training.sync_group_bytes is -1")));
  EXPECT_THAT(
      WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "ASYNC",
                       "sync_group_bytes": 65536})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("training.sync_group_bytes applies to SYNC training "
                         "only")));
}

TEST(JobConfigTest, GradientClippingBoundsArePositive) {
  ASSERT_OK_AND_ASSIGN(
      JobConfig clipped,
      WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "SYNC",
                       "gradient_clipping": {"clip_norm": 1.5,
                         "clip_value": 3, "global_clip_norm": 5}})"));
  EXPECT_EQ(clipped.training().gradient_clipping().clip_norm(), 1.5);
  EXPECT_EQ(clipped.training().gradient_clipping().global_clip_norm(), 5);
  for (const char* field : {"clip_norm", "clip_value", "global_clip_norm"}) {
    for (const char* value : {"0", "-1", "1e-50"}) {
      EXPECT_THAT(
          WithTraining(absl::StrCat(
              R"({"batch_size": 8, "steps": 5, "mode": "ASYNC", "gradient_clipping": {")",
              field, R"(": )", value, "}}")),
          StatusIs(absl::StatusCode::kInvalidArgument,
                   HasSubstr(absl::StrCat("training.gradient_clipping.", field,
                                          " is ", value))));
    }
  }
}

TEST(JobConfigTest, BoundedModeNeedsMaxStalenessAndNothingElseTakesIt) {
  ASSERT_OK_AND_ASSIGN(
      JobConfig zero,
      WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "BOUNDED",
                       "max_staleness": 0})"));
  EXPECT_TRUE(zero.training().has_max_staleness());
  EXPECT_THAT(
      WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "BOUNDED"})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("training.max_staleness is needed by \"mode\": "
                         "\"BOUNDED\"")));
  EXPECT_THAT(WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "BOUNDED",
                       "max_staleness": -1})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("training.max_staleness is -1; use 0 to")));
  EXPECT_THAT(WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "BOUNDED",
                       "max_staleness": 2000000000})"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "BOUNDED",
                       "max_staleness": 2, "replicas_to_aggregate": 1})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("replicas_to_aggregate applies to SYNC")));
  EXPECT_THAT(WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "ASYNC",
                       "max_staleness": 2})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("training.max_staleness applies to \"mode\": "
                                 "\"BOUNDED\" only (this job is ASYNC)")));
}

TEST(JobConfigTest, BadTrainingValuesAreRejectedByField) {
  EXPECT_THAT(WithTraining(R"({"batch_size": 0, "steps": 1, "mode": "ASYNC"})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("training.batch_size is 0")));
  EXPECT_THAT(WithTraining(R"({"batch_size": 8, "mode": "ASYNC"})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("needs \"steps\" or \"epochs\"")));
  EXPECT_THAT(
      WithTraining(R"({"batch_size": 8, "epochs": -1, "mode": "ASYNC"})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("training.epochs is -1")));
  EXPECT_THAT(WithTraining(R"({"batch_size": 8, "steps": 5})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("training.mode is UPDATE_MODE_UNSPECIFIED")));
  EXPECT_THAT(WithTraining(R"({"batch_size": 8, "steps": 5, "mode": "FAST"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("FAST")));
  // A number JSON maps onto no mode: named as the number it is.
  EXPECT_THAT(WithTraining(R"({"batch_size": 8, "steps": 5, "mode": 7})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("training.mode is 7; use")));
}

// Shifted into bytes: a negative value turned the memory check off, and
// 2^50 MiB overflowed int64.
TEST(JobConfigTest, WorkerMemoryIsZeroOrAPlausibleNumberOfMib) {
  for (const char* mib : {"-1", "-4096", "1125899906842624", "1073741825"}) {
    SCOPED_TRACE(mib);
    EXPECT_THAT(WithTraining(absl::StrCat(
                    R"({"batch_size": 8, "steps": 5, )",
                    R"("mode": "ASYNC", "worker_memory_mib": )", mib, "}")),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(absl::StrCat(
                                   "training.worker_memory_mib is ", mib)),
                               HasSubstr("up to 1073741824 (1 PiB)"))));
  }
  for (const char* mib : {"0", "512", "1073741824"}) {
    SCOPED_TRACE(mib);
    EXPECT_OK(WithTraining(
        absl::StrCat(R"({"batch_size": 8, "steps": 5, )",
                     R"("mode": "ASYNC", "worker_memory_mib": )", mib, "}")));
  }
}

TEST(JobConfigTest, HalfATestSetIsRejected) {
  std::string json = kMinimal;
  json.replace(json.find("\"train_labels\": \"b.gz\""), 22,
               "\"train_labels\": \"b.gz\", \"test_images\": \"c.gz\"");
  EXPECT_THAT(ParseJobConfig(json, "t.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be given together")));
}

TEST(JobConfigTest, NumClassesIsTwoTo256OrLeftOut) {
  for (const char* classes : {"1", "257", "-3"}) {
    std::string json = kMinimal;
    json.replace(
        json.find("\"train_labels\": \"b.gz\""), 22,
        std::string("\"train_labels\": \"b.gz\", \"num_classes\": ") + classes);
    EXPECT_THAT(ParseJobConfig(json, "t.json"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("data.num_classes")))
        << classes;
  }
  std::string json = kMinimal;
  json.replace(json.find("\"train_labels\": \"b.gz\""), 22,
               "\"train_labels\": \"b.gz\", \"num_classes\": 10");
  ASSERT_OK_AND_ASSIGN(JobConfig config, ParseJobConfig(json, "t.json"));
  EXPECT_EQ(config.data().num_classes(), 10);
}

TEST(JobConfigTest, EpochsBecomeGlobalSteps) {
  ASSERT_OK_AND_ASSIGN(
      JobConfig async,
      WithTraining(R"({"batch_size": 100, "epochs": 2, "mode": "ASYNC"})"));
  EXPECT_EQ(TotalGlobalSteps(async, 60000, 2), 1200);
  ASSERT_OK_AND_ASSIGN(
      JobConfig sync,
      WithTraining(R"({"batch_size": 100, "epochs": 2, "mode": "SYNC"})"));
  EXPECT_EQ(TotalGlobalSteps(sync, 60000, 2), 600);
  EXPECT_EQ(ReplicasToAggregate(sync, 3), 3);
  ASSERT_OK_AND_ASSIGN(
      JobConfig steps,
      WithTraining(R"({"batch_size": 100, "steps": 77, "mode": "SYNC"})"));
  EXPECT_EQ(TotalGlobalSteps(steps, 60000, 2), 77);
}

// A batch no worker's shard can fill would never give a step (the
// incomplete last batch of an epoch is dropped): refused before training.
TEST(JobConfigTest, ABatchLargerThanAWorkersShardIsRefused) {
  ASSERT_OK_AND_ASSIGN(
      JobConfig config,
      WithTraining(R"({"batch_size": 30000, "epochs": 1, "mode": "ASYNC"})"));
  EXPECT_OK(CheckBatchFitsShards(config, 60000, 2));
  EXPECT_THAT(CheckBatchFitsShards(config, 60000, 3),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("training.batch_size is 30000"),
                             HasSubstr("as few as 20000 examples"),
                             HasSubstr("use a batch_size of at most 20000"))));
  // Sizes differ by at most one: 59999 over 2 gives 29999 and 30000.
  EXPECT_THAT(CheckBatchFitsShards(config, 59999, 2),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(CheckBatchFitsShards(config, 0, 1),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("holds no examples")));
  // More workers than examples: some shards are empty, and no batch size
  // helps them (it said "use a batch_size of at most 1", which failed too).
  ASSERT_OK_AND_ASSIGN(
      JobConfig one,
      WithTraining(R"({"batch_size": 1, "epochs": 1, "mode": "ASYNC"})"));
  EXPECT_THAT(CheckBatchFitsShards(one, 100, 200),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("100 training examples are fewer than "
                                       "the 200 workers"),
                             HasSubstr("use at most 100 workers"))));
  // A batch larger than the whole set: no worker count helps.
  EXPECT_THAT(CheckBatchFitsShards(config, 100, 200),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the whole training set holds 100 examples")));
  ASSERT_OK_AND_ASSIGN(
      JobConfig ten,
      WithTraining(R"({"batch_size": 10, "epochs": 1, "mode": "ASYNC"})"));
  EXPECT_THAT(CheckBatchFitsShards(ten, 100, 200),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("use at most 10 workers for")));
}

TEST(JobConfigTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadJobConfigFile("/nonexistent/job.json"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("/nonexistent/job.json")));
}

}  // namespace
}  // namespace psflow
