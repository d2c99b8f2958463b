#include "data/synth_ctr.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/binary_metrics.h"
#include "common/file_util.h"
#include "common/status_matchers.h"
#include "data/criteo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

std::string Dir(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

// A small data set in the Criteo shape (13 integer, 26 categorical).
SynthCtrOptions Small(const std::string& name) {
  SynthCtrOptions options;
  options.out_dir = Dir(name);
  options.num_train = 20000;
  options.num_test = 10000;
  options.vocabulary = 20000;
  options.threads = 2;
  return options;
}

CriteoFormat FormatOf(const SynthCtrOptions& options) {
  CriteoFormat format;
  format.num_dense = options.num_dense;
  format.num_fields = options.num_fields;
  return format;
}

TEST(SynthCtrTest, WritesACompleteDataSetThatReadsBack) {
  const SynthCtrOptions options = Small("complete");
  ASSERT_OK_AND_ASSIGN(SynthCtrSummary summary, GenerateSynthCtr(options));
  EXPECT_EQ(summary.train_path, options.out_dir + "/train.txt");
  EXPECT_EQ(summary.test_path, options.out_dir + "/test.txt");
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> files,
                       ListDirectory(options.out_dir));
  EXPECT_THAT(files,
              ::testing::ElementsAre("planted.json", "test.txt", "train.txt"));

  ASSERT_OK_AND_ASSIGN(CtrExamples train,
                       LoadCriteoFile(summary.train_path, FormatOf(options)));
  ASSERT_OK_AND_ASSIGN(CtrExamples test,
                       LoadCriteoFile(summary.test_path, FormatOf(options)));
  EXPECT_EQ(train.num_examples, 20000);
  EXPECT_EQ(test.num_examples, 10000);
  EXPECT_EQ(summary.train_examples, 20000);
  EXPECT_EQ(summary.test_examples, 10000);

  int64_t positives = 0;
  for (uint8_t label : train.labels) positives += label;
  EXPECT_DOUBLE_EQ(summary.train_positive_rate, positives / 20000.0);
  // The bias was fitted for 25% positives.
  EXPECT_NEAR(summary.train_positive_rate, 0.25, 0.03);
  EXPECT_NEAR(summary.test_positive_rate, 0.25, 0.03);

  const std::set<int64_t> distinct(train.ids.begin(), train.ids.end());
  EXPECT_EQ(summary.distinct_train_ids, static_cast<int64_t>(distinct.size()));
  EXPECT_GT(summary.distinct_train_ids, 20000);

  ASSERT_OK_AND_ASSIGN(std::string planted,
                       ReadFileToString(summary.planted_path));
  EXPECT_THAT(planted, HasSubstr("\"train\": \"train.txt\""));
  EXPECT_THAT(planted, HasSubstr("\"zipf\": 1.1,"));
  EXPECT_THAT(planted, HasSubstr(absl::StrCat("\"distinct_train_ids\": ",
                                              summary.distinct_train_ids)));
  EXPECT_THAT(planted, HasSubstr("\"planted_test_auc\": 0."));
}

TEST(SynthCtrTest, ThePlantedAucIsTheRecomputedModelsAuc) {
  const SynthCtrOptions options = Small("auc");
  ASSERT_OK_AND_ASSIGN(SynthCtrSummary summary, GenerateSynthCtr(options));
  EXPECT_GT(summary.planted_test_auc, 0.6);
  EXPECT_LT(summary.planted_test_auc, 0.95);

  // From the file as read back, with only the options and the bias.
  ASSERT_OK_AND_ASSIGN(CtrExamples test,
                       LoadCriteoFile(summary.test_path, FormatOf(options)));
  const PlantedCtrModel model = SynthCtrPlantedModel(options, summary.bias);
  std::vector<float> probabilities;
  for (int64_t i = 0; i < test.num_examples; ++i) {
    probabilities.push_back(model.Probability(test.DenseOf(i), test.IdsOf(i)));
  }
  ASSERT_OK_AND_ASSIGN(double auc, AreaUnderRoc(probabilities, test.labels));
  EXPECT_EQ(auc, summary.planted_test_auc);
  EXPECT_EQ(LogLoss(probabilities, test.labels), summary.planted_test_log_loss);
  // A model that knows nothing scores 0.5; the labels follow the model.
  const double mean_p =
      std::accumulate(probabilities.begin(), probabilities.end(), 0.0) /
      probabilities.size();
  EXPECT_NEAR(mean_p, summary.test_positive_rate, 0.02);
}

TEST(SynthCtrTest, LargerWeightsMakeAnEasierProblem) {
  SynthCtrOptions weak = Small("weak");
  weak.weight_scale = 0.05;
  SynthCtrOptions strong = Small("strong");
  strong.weight_scale = 0.6;
  ASSERT_OK_AND_ASSIGN(SynthCtrSummary a, GenerateSynthCtr(weak));
  ASSERT_OK_AND_ASSIGN(SynthCtrSummary b, GenerateSynthCtr(strong));
  EXPECT_LT(a.planted_test_auc, 0.62);
  EXPECT_GT(b.planted_test_auc, 0.8);
}

TEST(SynthCtrTest, TheSameSeedGivesTheSameBytesWhateverTheThreads) {
  for (bool gzip : {false, true}) {
    SynthCtrOptions one = Small(absl::StrCat("one", gzip));
    one.num_train = 20000;  // 3 chunks: threads finish them out of order
    one.num_test = 2000;
    one.gzip = gzip;
    one.threads = 1;
    SynthCtrOptions three = one;
    three.out_dir = Dir(absl::StrCat("three", gzip));
    three.threads = 3;
    SynthCtrOptions other = one;
    other.out_dir = Dir(absl::StrCat("other", gzip));
    other.seed = 2;
    ASSERT_OK_AND_ASSIGN(SynthCtrSummary a, GenerateSynthCtr(one));
    ASSERT_OK_AND_ASSIGN(SynthCtrSummary b, GenerateSynthCtr(three));
    ASSERT_OK_AND_ASSIGN(SynthCtrSummary c, GenerateSynthCtr(other));
    for (auto path :
         {&SynthCtrSummary::train_path, &SynthCtrSummary::test_path}) {
      ASSERT_OK_AND_ASSIGN(std::string first, ReadFileToString(a.*path));
      ASSERT_OK_AND_ASSIGN(std::string second, ReadFileToString(b.*path));
      ASSERT_OK_AND_ASSIGN(std::string reseeded, ReadFileToString(c.*path));
      EXPECT_TRUE(first == second) << a.*path << " vs " << b.*path;
      EXPECT_FALSE(first == reseeded) << a.*path << " vs " << c.*path;
    }
    EXPECT_EQ(a.planted_test_auc, b.planted_test_auc);
  }
}

TEST(SynthCtrTest, GzippedAndPlainHoldTheSameExamples) {
  SynthCtrOptions plain = Small("plain");
  SynthCtrOptions gzip = Small("gzip");
  gzip.gzip = true;
  ASSERT_OK_AND_ASSIGN(SynthCtrSummary a, GenerateSynthCtr(plain));
  ASSERT_OK_AND_ASSIGN(SynthCtrSummary b, GenerateSynthCtr(gzip));
  EXPECT_EQ(b.train_path, gzip.out_dir + "/train.txt.gz");
  ASSERT_OK_AND_ASSIGN(CtrExamples x, LoadCriteoFile(a.train_path));
  ASSERT_OK_AND_ASSIGN(CtrExamples y, LoadCriteoFile(b.train_path));
  EXPECT_EQ(x.ids, y.ids);
  EXPECT_EQ(x.labels, y.labels);
  ASSERT_OK_AND_ASSIGN(int64_t plain_bytes, FileSize(a.train_path));
  ASSERT_OK_AND_ASSIGN(int64_t gzip_bytes, FileSize(b.train_path));
  EXPECT_LT(gzip_bytes * 2, plain_bytes);
}

TEST(SynthCtrTest, ValueFrequenciesFollowAPowerLaw) {
  SynthCtrOptions options = Small("zipf");
  options.num_train = 50000;
  ASSERT_OK_AND_ASSIGN(SynthCtrSummary summary, GenerateSynthCtr(options));
  ASSERT_OK_AND_ASSIGN(CtrExamples train, LoadCriteoFile(summary.train_path));
  // The largest field (20000 values).
  const int field = options.num_fields - 1;
  std::map<int64_t, int64_t> counts;
  for (int64_t i = 0; i < train.num_examples; ++i) {
    for (int64_t id : train.Bag(i, field)) ++counts[id];
  }
  std::vector<int64_t> sorted;
  for (const auto& [id, count] : counts) sorted.push_back(count);
  std::sort(sorted.rbegin(), sorted.rend());
  const int64_t top = sorted.front(), median = sorted[sorted.size() / 2];
  // Zipf 1.1 over 20000 values: the top value is ~11% of 47500 draws; the
  // median value seen is seen about once.
  EXPECT_GT(top, 3000);
  EXPECT_LE(median, 3);
  EXPECT_GT(top, 500 * median);
  // Rank 2 about 2^-1.1 times rank 1.
  EXPECT_NEAR(static_cast<double>(sorted[1]) / top, std::pow(2, -1.1), 0.05);
}

TEST(SynthCtrTest, MissingValuesAreWrittenEmpty) {
  SynthCtrOptions options = Small("missing");
  options.missing = 0.3;
  ASSERT_OK_AND_ASSIGN(SynthCtrSummary summary, GenerateSynthCtr(options));
  ASSERT_OK_AND_ASSIGN(CtrExamples train, LoadCriteoFile(summary.train_path));
  const double bags = static_cast<double>(train.num_examples) * 26;
  EXPECT_NEAR(1 - train.ids.size() / bags, 0.3, 0.01);
}

TEST(SynthCtrTest, OtherColumnCountsAreWrittenAndRead) {
  SynthCtrOptions options = Small("shape");
  options.num_dense = 0;
  options.num_fields = 3;
  ASSERT_OK_AND_ASSIGN(SynthCtrSummary summary, GenerateSynthCtr(options));
  EXPECT_THAT(LoadCriteoFile(summary.train_path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(":1: 4 tab-separated columns, expected 40")));
  ASSERT_OK_AND_ASSIGN(CtrExamples train,
                       LoadCriteoFile(summary.train_path, FormatOf(options)));
  EXPECT_EQ(train.num_examples, options.num_train);
}

TEST(SynthCtrTest, AnExistingDataSetIsKeptUnlessOverwriteIsAsked) {
  SynthCtrOptions options = Small("existing");
  options.num_train = 100;
  options.num_test = 100;
  ASSERT_OK(GenerateSynthCtr(options));
  EXPECT_THAT(GenerateSynthCtr(options),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("the directory already holds a data set")));
  options.overwrite = true;
  options.gzip = true;
  ASSERT_OK(GenerateSynthCtr(options));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> files,
                       ListDirectory(options.out_dir));
  // The plain files of the first run are gone with it.
  EXPECT_THAT(files, ::testing::ElementsAre("planted.json", "test.txt.gz",
                                            "train.txt.gz"));
}

TEST(SynthCtrTest, AnIncompleteDataSetIsAlsoKept) {
  SynthCtrOptions options = Small("incomplete");
  ASSERT_OK(MakeDirectories(options.out_dir));
  ASSERT_OK(WriteFileAtomically(options.out_dir + "/train.txt", "1\t2\n"));
  EXPECT_THAT(GenerateSynthCtr(options),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("/train.txt exists")));
  // A leftover of a crashed run is not a data set: it is replaced.
  SynthCtrOptions crashed = Small("crashed");
  crashed.num_train = 100;
  ASSERT_OK(MakeDirectories(crashed.out_dir));
  ASSERT_OK(WriteFileAtomically(crashed.out_dir + "/train.txt.partial", "x"));
  ASSERT_OK(GenerateSynthCtr(crashed));
}

TEST(SynthCtrTest, BadOptionsAreNamed) {
  SynthCtrOptions options = Small("bad");
  options.zipf = 0;
  EXPECT_THAT(GenerateSynthCtr(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the Zipf exponent is 0; use 0.01 to 10")));
  options = Small("bad");
  options.num_train = 0;
  EXPECT_THAT(CheckSynthCtrOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("training examples is 0; use 1 to")));
  options = Small("bad");
  options.missing = std::nan("");
  EXPECT_THAT(CheckSynthCtrOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing-value probability is nan")));
  options.out_dir = "";
  EXPECT_THAT(
      CheckSynthCtrOptions(options),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--out_dir")));
  EXPECT_FALSE(PathExists(Dir("bad")));
}

TEST(SynthCtrTest, FieldVocabulariesSpreadFromFourToTheLargest) {
  SynthCtrOptions options;
  const std::vector<int64_t> v = SynthCtrFieldVocabularies(options);
  ASSERT_EQ(v.size(), 26u);
  EXPECT_EQ(v.front(), 4);
  EXPECT_EQ(v.back(), 2000000);
  EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
  options.vocabulary = 2;
  options.num_fields = 1;
  EXPECT_EQ(SynthCtrFieldVocabularies(options), std::vector<int64_t>{2});
}

}  // namespace
}  // namespace psflow
