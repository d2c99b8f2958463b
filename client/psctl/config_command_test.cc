#include "client/psctl/config_command.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/idx_files.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

std::string Temp(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/config_check_", name);
}

// An uncompressed IDX file of unsigned bytes holding `data` (which may be
// shorter than the dimensions promise), at a fresh path.
std::string WriteIdx(const std::string& name, const std::vector<int>& dims,
                     const std::vector<uint8_t>& data) {
  absl::StatusOr<std::string> path =
      ::psflow::testing::WriteIdxFile(name, dims, data);
  EXPECT_TRUE(path.ok()) << path.status();
  return path.value_or("");
}

std::vector<uint8_t> Labels(int n) {
  std::vector<uint8_t> labels;
  for (int i = 0; i < n; ++i) labels.push_back(i % 3);
  return labels;
}

// Eight 4x4 training images and four test images in three classes, and a
// job on them; {{NAME}} placeholders are replaced by Job().
class ConfigCheckTest : public ::testing::Test {
 protected:
  std::string train_images_ =
      WriteIdx("train_images", {8, 4, 4}, std::vector<uint8_t>(8 * 16, 9));
  std::string train_labels_ = WriteIdx("train_labels", {8}, Labels(8));
  std::string test_images_ =
      WriteIdx("test_images", {4, 4, 4}, std::vector<uint8_t>(4 * 16, 9));
  std::string test_labels_ = WriteIdx("test_labels", {4}, Labels(4));

  static constexpr char kJob[] = R"({
  "name": "tiny",
  "model": {"mlp": {"hidden_sizes": [8]}},
  "optimizer": {"kind": "ADAM"},
  "learning_rate": {"learning_rate": 0.01},
  "data": {"train_images": "{{TRAIN_IMAGES}}",
           "train_labels": "{{TRAIN_LABELS}}",
           "test_images": "{{TEST_IMAGES}}",
           "test_labels": "{{TEST_LABELS}}"},
  "training": {"batch_size": 2, "epochs": 1, "mode": "ASYNC"}
})";

  // Writes `json` (the placeholders filled in) as a job config file.
  std::string Job(const std::string& json = kJob) {
    const std::string path = Temp("job.json");
    EXPECT_TRUE(WriteFileAtomically(
                    path, absl::StrReplaceAll(
                              json, {{"{{TRAIN_IMAGES}}", train_images_},
                                     {"{{TRAIN_LABELS}}", train_labels_},
                                     {"{{TEST_IMAGES}}", test_images_},
                                     {"{{TEST_LABELS}}", test_labels_}}))
                    .ok());
    return path;
  }

  // kJob with `from` replaced by `to`.
  std::string JobWith(const std::string& from, const std::string& to) {
    std::string json = kJob;
    const size_t at = json.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) json.replace(at, from.size(), to);
    return Job(json);
  }

  int Check(const std::vector<std::string>& args) {
    Subcommands commands;
    commands.push_back(NewConfigCheckCommand([] {
      return HostMemory{int64_t{64} << 30, "the test's host"};
    }));
    std::vector<std::string> all = {"config", "check"};
    all.insert(all.end(), args.begin(), args.end());
    std::ostringstream o, e;
    const int code = RunPsctl(commands, all, o, e);
    out_ = o.str();
    err_ = e.str();
    return code;
  }

  // The lines of err_.
  std::vector<std::string> Problems() {
    return absl::StrSplit(err_, '\n', absl::SkipEmpty());
  }

  std::string out_, err_;
};

TEST_F(ConfigCheckTest, AGoodJobIsOkAndDescribed) {
  ASSERT_EQ(Check({Job()}), kExitOk) << err_;
  EXPECT_THAT(out_, StartsWith("OK: tiny: model mlp 16-8-3"));
  EXPECT_THAT(out_, HasSubstr(" parameters ("));
  EXPECT_THAT(out_, HasSubstr("on 1 parameter server; 1 worker, ASYNC, "
                              "batch 2, 4 global steps; data: 8 training "
                              "examples of [4, 4] in 3 classes, 4 test "
                              "examples\n"));
  EXPECT_THAT(out_, HasSubstr("\nmemory: each worker needs about"));
  EXPECT_THAT(out_, HasSubstr("fits the test's host (64.0 GiB)"));
  EXPECT_THAT(err_, IsEmpty());
}

TEST_F(ConfigCheckTest, TheClusterSizeIsTakenIntoAccount) {
  ASSERT_EQ(Check({Job(), "--ps=2", "--workers=4"}), kExitOk) << err_;
  EXPECT_THAT(out_, HasSubstr("on 2 parameter servers; 4 workers, ASYNC, "
                              "batch 2, 4 global steps"));
  // Eight examples over eight workers: no shard fills a batch of two.
  EXPECT_EQ(Check({Job(), "--workers=8"}), kExitFailed);
  EXPECT_THAT(err_, HasSubstr("training.batch_size is 2 but the 8 training "
                              "examples over 8 workers"));
}

TEST_F(ConfigCheckTest, ASyntaxErrorIsPlacedByLineAndColumn) {
  EXPECT_EQ(Check({JobWith("\"name\": \"tiny\",", "\"name\": \"tiny\"")}),
            kExitFailed);
  EXPECT_THAT(Problems(),
              ElementsAre(AllOf(StartsWith("job config " + Temp("job.json")),
                                HasSubstr("line 3, column 3"))));
  EXPECT_THAT(out_, IsEmpty());
}

TEST_F(ConfigCheckTest, AnUnknownFieldIsNamed) {
  EXPECT_EQ(Check({JobWith("\"epochs\"", "\"epocs\"")}), kExitFailed);
  EXPECT_THAT(Problems(), ElementsAre(HasSubstr("epocs")));
}

TEST_F(ConfigCheckTest, AKeyGivenTwiceIsRefused) {
  EXPECT_EQ(Check({JobWith("\"epochs\": 1", "\"epochs\": 1, \"epochs\": 2")}),
            kExitFailed);
  EXPECT_THAT(Problems(), ElementsAre(HasSubstr("duplicate key \"epochs\"")));
}

TEST_F(ConfigCheckTest, AValueOfTheWrongTypeIsRefused) {
  EXPECT_EQ(Check({JobWith("\"batch_size\": 2", "\"batch_size\": [2]")}),
            kExitFailed);
  EXPECT_THAT(Problems(), ElementsAre(HasSubstr("batch_size")));
}

TEST_F(ConfigCheckTest, AMissingDataFileIsNamed) {
  train_images_ = Temp("no_such_file.gz");
  EXPECT_EQ(Check({Job()}), kExitFailed);
  EXPECT_THAT(Problems(), ElementsAre(HasSubstr("cannot open data file " +
                                                Temp("no_such_file.gz"))));
}

TEST_F(ConfigCheckTest, LabelsOfAnotherSplitAreRefused) {
  train_labels_ = test_labels_;
  EXPECT_EQ(Check({Job()}), kExitFailed);
  EXPECT_THAT(Problems(),
              ElementsAre(HasSubstr(train_images_ + " holds 8 examples but " +
                                    test_labels_ + " holds 4 labels")));
}

TEST_F(ConfigCheckTest, TestImagesOfAnotherSizeAreRefused) {
  test_images_ =
      WriteIdx("small_images", {4, 3, 3}, std::vector<uint8_t>(4 * 9, 1));
  EXPECT_EQ(Check({Job()}), kExitFailed);
  EXPECT_THAT(Problems(),
              ElementsAre(HasSubstr("the test data's examples have shape "
                                    "[3, 3] but the model takes [4, 4]")));
}

TEST_F(ConfigCheckTest, TestLabelsOutsideTheClassesAreRefused) {
  test_labels_ = WriteIdx("bad_labels", {4}, {0, 1, 7, 2});
  EXPECT_EQ(Check({Job()}), kExitFailed);
  EXPECT_THAT(
      Problems(),
      ElementsAre(HasSubstr(test_labels_ + " record 2 has label 7, outside "
                                           "the job's 3 classes")));
}

TEST_F(ConfigCheckTest, ATruncatedImagesFileIsRefused) {
  // The header promises 8 images; the file holds 5. Only a full read (the
  // workers') finds it: the chief reads the header.
  train_images_ =
      WriteIdx("truncated", {8, 4, 4}, std::vector<uint8_t>(5 * 16, 9));
  EXPECT_EQ(Check({Job()}), kExitFailed);
  EXPECT_THAT(Problems(),
              ElementsAre(AllOf(HasSubstr(train_images_ + ": truncated"),
                                HasSubstr("promises 128 bytes"))));
}

TEST_F(ConfigCheckTest, AModelTooLargeForTheWorkersMemoryIsRefused) {
  EXPECT_EQ(Check({JobWith("\"mode\": \"ASYNC\"",
                           "\"mode\": \"ASYNC\", \"worker_memory_mib\": 100")}),
            kExitFailed);
  EXPECT_THAT(Problems(), ElementsAre(AllOf(
                              HasSubstr("the job does not fit in memory"),
                              HasSubstr("more than the 100 MiB each worker "
                                        "has (training.worker_memory_mib)"))));
}

TEST_F(ConfigCheckTest, IndependentProblemsAreEachOnTheirOwnLine) {
  test_labels_ = Temp("missing_test_labels.gz");
  EXPECT_EQ(Check({JobWith("\"mode\": \"ASYNC\"",
                           "\"mode\": \"ASYNC\", \"worker_memory_mib\": 100")}),
            kExitFailed);
  EXPECT_THAT(
      Problems(),
      ElementsAre(AllOf(StartsWith("job config " + Temp("job.json") + ": "),
                        HasSubstr("cannot open data file " + test_labels_)),
                  AllOf(StartsWith("job config " + Temp("job.json") + ": "),
                        HasSubstr("training.worker_memory_mib"))));
}

TEST_F(ConfigCheckTest, AModelProblemIsFoundEvenWithoutTheData) {
  train_images_ = Temp("no_such_file.gz");
  EXPECT_EQ(Check({JobWith("\"hidden_sizes\": [8]", "\"hidden_sizes\": [-8]")}),
            kExitFailed);
  ASSERT_EQ(Problems().size(), 2u) << err_;
  EXPECT_THAT(Problems()[0], HasSubstr("hidden_sizes"));
  EXPECT_THAT(Problems()[1], HasSubstr("cannot open data file"));
}

TEST_F(ConfigCheckTest, AMissingConfigIsNamed) {
  EXPECT_EQ(Check({Temp("no_such_job.json")}), kExitFailed);
  EXPECT_THAT(Problems(),
              ElementsAre(HasSubstr("job config " + Temp("no_such_job.json") +
                                    " cannot be read")));
}

TEST_F(ConfigCheckTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Check({}), kExitUsage);
  EXPECT_THAT(err_, HasSubstr("psctl config check: takes <job.json>; got 0 "
                              "arguments"));
  EXPECT_EQ(Check({Job(), "--workers=0"}), kExitUsage);
  EXPECT_THAT(err_, HasSubstr("a job needs at least one of each"));
  EXPECT_EQ(Check({Job(), "--evaluator"}), kExitUsage);
}

constexpr char kCtrJob[] = R"({
  "name": "ctr",
  "model": {"wide_deep": {"embedding_dim": 4, "hidden_sizes": [8]}},
  "optimizer": {"kind": "ADAGRAD"},
  "learning_rate": {"learning_rate": 0.05},
  "data": {"format": "CRITEO", "num_dense": 1, "num_fields": 2,
           "train_path": "{{DIR}}/train.txt",
           "test_path": "{{DIR}}/test.txt"{{SYNTHESIZE}}},
  "training": {"batch_size": 2, "steps": 10, "mode": "ASYNC"}
})";

std::string CtrJob(const std::string& dir, const std::string& synthesize) {
  const std::string path = Temp("ctr.json");
  EXPECT_TRUE(
      WriteFileAtomically(
          path, absl::StrReplaceAll(kCtrJob, {{"{{DIR}}", dir},
                                              {"{{SYNTHESIZE}}", synthesize}}))
          .ok());
  return path;
}

TEST_F(ConfigCheckTest, CtrDataIsReadLineByLine) {
  const std::string dir = Temp("ctr_data");
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/train.txt",
                          "1\t5\ta1\tb\n0\t\tb2\t\n0\t3\t\tc\n1\t1\tf\t\n")
          .ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/test.txt", "1\t5\ta1\tb\n").ok());
  ASSERT_EQ(Check({CtrJob(dir, "")}), kExitOk) << err_;
  EXPECT_THAT(out_, HasSubstr("and 2 embedding tables (embedding dim 4, "
                              "linear dim 1)"));
  EXPECT_THAT(out_, HasSubstr("data: 4 training examples of 1 integer and 2 "
                              "categorical columns, 1 test example\n"));

  // A test file of another format.
  ASSERT_TRUE(WriteFileAtomically(dir + "/test.txt", "1\t5\ta1\n").ok());
  EXPECT_EQ(Check({CtrJob(dir, "")}), kExitFailed);
  EXPECT_THAT(Problems(), ElementsAre(HasSubstr(dir + "/test.txt:1:")));
}

TEST_F(ConfigCheckTest, CtrDataToBeSynthesizedIsCheckedAsItWillBe) {
  const std::string dir = Temp("not_yet_generated");
  ASSERT_EQ(Check({CtrJob(dir, R"(, "synthesize": {"train_examples": 1000,
                                                   "test_examples": 300})")}),
            kExitOk)
      << err_;
  EXPECT_THAT(out_, HasSubstr("data: 1000 training examples of 1 integer "
                              "and 2 categorical columns\n"));
  EXPECT_THAT(out_, HasSubstr("\ndata: " + dir +
                              "/train.txt does not exist yet: psctl local "
                              "generates it"));
  EXPECT_THAT(out_, HasSubstr("psctl data synth-ctr --out_dir=" + dir +
                              " --train_examples=1000 --test_examples=300 "
                              "--dense=1 --fields=2"));
  EXPECT_FALSE(PathExists(dir));
}

TEST_F(ConfigCheckTest, SynthesizedDataNeedsItsPairOfPaths) {
  const std::string path = CtrJob(Temp("elsewhere"), R"(, "synthesize": {})");
  std::string json = *ReadFileToString(path);
  json.replace(json.find("/test.txt"), 9, "/held_out.txt");
  ASSERT_TRUE(WriteFileAtomically(path, json).ok());
  EXPECT_EQ(Check({path}), kExitFailed);
  EXPECT_THAT(Problems(),
              ElementsAre(HasSubstr("data.synthesize writes <dir>/train.txt "
                                    "and <dir>/test.txt")));
}

}  // namespace
}  // namespace psflow
