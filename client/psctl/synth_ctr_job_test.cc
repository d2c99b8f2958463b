// SynthCtrOptionsOf: a job's data.synthesize into the generator's options.
#include "client/psctl/synth_ctr_job.h"

#include <unistd.h>

#include <limits>
#include <string>

#include "common/file_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

JobConfig CtrJob() {
  JobConfig job;
  DataConfig& data = *job.mutable_data();
  data.set_format(DataConfig::CRITEO);
  data.set_train_path("/tmp/synth/train.txt");
  data.set_test_path("/tmp/synth/test.txt");
  data.mutable_synthesize();
  return job;
}

TEST(SynthCtrJobTest, ZerosKeepTheDefaultsAndPositiveValuesAreTaken) {
  JobConfig job = CtrJob();
  ASSERT_OK_AND_ASSIGN(SynthCtrOptions defaults, SynthCtrOptionsOf(job));
  const SynthCtrOptions generator;
  EXPECT_EQ(defaults.out_dir, "/tmp/synth");
  EXPECT_EQ(defaults.num_train, generator.num_train);
  EXPECT_EQ(defaults.num_test, generator.num_test);
  EXPECT_EQ(defaults.vocabulary, generator.vocabulary);
  EXPECT_EQ(defaults.zipf, generator.zipf);
  EXPECT_EQ(defaults.weight_scale, generator.weight_scale);

  SyntheticCtrConfig& s = *job.mutable_data()->mutable_synthesize();
  s.set_train_examples(1000);
  s.set_test_examples(100);
  s.set_vocabulary(50);
  s.set_zipf(1.3);
  s.set_weight_scale(0.5);
  s.set_seed(7);
  ASSERT_OK_AND_ASSIGN(SynthCtrOptions o, SynthCtrOptionsOf(job));
  EXPECT_EQ(o.num_train, 1000);
  EXPECT_EQ(o.num_test, 100);
  EXPECT_EQ(o.vocabulary, 50);
  EXPECT_EQ(o.zipf, 1.3);
  EXPECT_EQ(o.weight_scale, 0.5);
  EXPECT_EQ(o.seed, 7u);
}

// A negative setting was read as 0, the default: a typo became a data set
// of another size without a word.
TEST(SynthCtrJobTest, ANegativeOrNanSettingIsRefusedByName) {
  struct Case {
    void (*set)(SyntheticCtrConfig&);
    std::string expected;
  };
  const Case cases[] = {
      {[](SyntheticCtrConfig& s) { s.set_train_examples(-1000); },
       "data.synthesize.train_examples is -1000"},
      {[](SyntheticCtrConfig& s) { s.set_test_examples(-1); },
       "data.synthesize.test_examples is -1"},
      {[](SyntheticCtrConfig& s) { s.set_vocabulary(-5); },
       "data.synthesize.vocabulary is -5"},
      {[](SyntheticCtrConfig& s) { s.set_zipf(-1.1); },
       "data.synthesize.zipf is -1.1"},
      {[](SyntheticCtrConfig& s) {
         s.set_zipf(std::numeric_limits<double>::quiet_NaN());
       },
       "data.synthesize.zipf is nan"},
      {[](SyntheticCtrConfig& s) { s.set_weight_scale(-0.25); },
       "data.synthesize.weight_scale is -0.25"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    JobConfig job = CtrJob();
    c.set(*job.mutable_data()->mutable_synthesize());
    EXPECT_THAT(SynthCtrOptionsOf(job),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(c.expected),
                               HasSubstr("use a positive number, or 0"))));
  }
}

// Above the generator's bounds is its own error, under the job's field.
TEST(SynthCtrJobTest, AValueBeyondTheGeneratorsBoundsIsRefused) {
  JobConfig job = CtrJob();
  job.mutable_data()->mutable_synthesize()->set_zipf(100);
  EXPECT_THAT(SynthCtrOptionsOf(job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("data.synthesize: synthetic CTR data: the "
                                 "Zipf exponent is 100")));
}

// A job whose data.synthesize folder is `dir`.
JobConfig CtrJobIn(const std::string& dir) {
  JobConfig job = CtrJob();
  job.mutable_data()->set_train_path(dir + "/train.txt");
  job.mutable_data()->set_test_path(dir + "/test.txt");
  return job;
}

std::string NewFolder(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  EXPECT_OK(RemoveRecursively(dir));
  EXPECT_OK(MakeDirectories(dir));
  return dir;
}

// A training file that is a link to a share not mounted yet is the user's
// data, not a missing file to generate (and replace the link with).
TEST(SynthCtrJobTest, ADanglingLinkIsNotMissingData) {
  const std::string dir = NewFolder("dangling");
  ASSERT_EQ(
      symlink("/nonexistent/share/train.txt", (dir + "/train.txt").c_str()), 0);
  EXPECT_FALSE(SynthesizesCtrData(CtrJobIn(dir)));
  EXPECT_TRUE(SynthesizesCtrData(CtrJobIn(NewFolder("empty"))));
}

// A synthetic set already there, made with other settings: the job would
// train on the stale set without a word.
TEST(SynthCtrJobTest, AStaleSyntheticSetIsRefused) {
  const std::string dir = NewFolder("stale");
  SynthCtrOptions made;
  made.out_dir = dir;
  made.num_train = 50;
  made.num_test = 20;
  made.vocabulary = 100;
  made.threads = 1;
  ASSERT_OK(GenerateSynthCtr(made).status());
  JobConfig job = CtrJobIn(dir);
  SyntheticCtrConfig& s = *job.mutable_data()->mutable_synthesize();
  s.set_train_examples(50);
  s.set_test_examples(20);
  s.set_vocabulary(100);
  ASSERT_FALSE(SynthesizesCtrData(job));
  EXPECT_OK(CheckSynthesizedDataMatches(job));
  s.set_train_examples(80);
  EXPECT_THAT(CheckSynthesizedDataMatches(job),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("other settings"),
                             HasSubstr("\"train_examples\": 80"),
                             HasSubstr("Remove that folder"))));
  // Data of the user's own (no planted.json) is never judged.
  ASSERT_OK(RemoveRecursively(dir + "/planted.json"));
  EXPECT_OK(CheckSynthesizedDataMatches(job));
}

}  // namespace
}  // namespace psflow
