// LoadTestData checks the held-out data against the chief's spec.
#include "evaluation/test_data.h"

#include <string>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/idx_files.h"

namespace psflow {
namespace {

using ::psflow::testing::WriteIdxFile;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A spec whose test set is `examples` 2x2 images of 3 classes.
JobSpec SpecWithTestSet(int examples) {
  JobSpec spec;
  DataConfig& data = *spec.mutable_config()->mutable_data();
  absl::StatusOr<std::string> images = WriteIdxFile(
      "test-images", {examples, 2, 2}, std::vector<uint8_t>(examples * 4, 7));
  absl::StatusOr<std::string> labels = WriteIdxFile(
      "test-labels", {examples}, std::vector<uint8_t>(examples, 1));
  EXPECT_OK(images);
  EXPECT_OK(labels);
  data.set_test_images(*images);
  data.set_test_labels(*labels);
  spec.add_example_shape(2);
  spec.add_example_shape(2);
  spec.set_num_classes(3);
  return spec;
}

// The evaluator reads its own copy of the test files: one that holds
// another count than the chief counted (another copy, a file still being
// written) is other data, and its accuracy would not be the job's.
TEST(LoadTestDataTest, ATestSetOtherThanTheChiefsIsRefused) {
  JobSpec spec = SpecWithTestSet(5);
  ASSERT_OK_AND_ASSIGN(TestData test, LoadTestData(spec));  // not counted
  EXPECT_EQ(test.num_examples(), 5);
  spec.set_num_test_examples(5);
  EXPECT_OK(LoadTestData(spec).status());
  spec.set_num_test_examples(8);
  EXPECT_THAT(LoadTestData(spec).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("hold 5 examples here, but 8 where "
                                       "the chief read them"),
                             HasSubstr("test-images"),
                             HasSubstr("the same data files"))));
}

}  // namespace
}  // namespace psflow
