#include "client/psctl/image_reference.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

TEST(ImageReferenceTest, NameAndTagSplitAtTheLastColon) {
  ASSERT_OK_AND_ASSIGN(ImageReference image,
                       ParseImageReference("psflow:dev", "--image"));
  EXPECT_EQ(image.name, "psflow");
  EXPECT_EQ(image.tag, "dev");
  EXPECT_EQ(image.digest, "");
}

TEST(ImageReferenceTest, RegistryPortIsPartOfTheName) {
  ASSERT_OK_AND_ASSIGN(
      ImageReference image,
      ParseImageReference("registry.example:5000/ml/psflow", "--image"));
  EXPECT_EQ(image.name, "registry.example:5000/ml/psflow");
  EXPECT_EQ(image.tag, "");
  ASSERT_OK_AND_ASSIGN(
      image,
      ParseImageReference("registry.example:5000/ml/psflow:1.2", "--image"));
  EXPECT_EQ(image.name, "registry.example:5000/ml/psflow");
  EXPECT_EQ(image.tag, "1.2");
}

TEST(ImageReferenceTest, DigestFollowsTheAt) {
  ASSERT_OK_AND_ASSIGN(
      ImageReference image,
      ParseImageReference("psflow:1@sha256:0123abcd", "--image"));
  EXPECT_EQ(image.name, "psflow");
  EXPECT_EQ(image.tag, "1");
  EXPECT_EQ(image.digest, "sha256:0123abcd");
  ASSERT_OK_AND_ASSIGN(
      image, ParseImageReference("psflow@sha256:0123abcd", "--image"));
  EXPECT_EQ(image.name, "psflow");
  EXPECT_EQ(image.tag, "");
  EXPECT_EQ(image.digest, "sha256:0123abcd");
}

TEST(ImageReferenceTest, CharactersYamlWouldNeedEscapedAreRefused) {
  EXPECT_THAT(ParseImageReference("psflow dev", "--image"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--image=psflow dev is not an image "
                                 "reference")));
  EXPECT_THAT(ParseImageReference("psflow:'1'", "--image"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not an image reference")));
}

TEST(ImageReferenceTest, EmptyPartsAreRefused) {
  for (const char* image : {"", ":1", "psflow:", "psflow@", "registry/",
                            "registry.example:5000/"}) {
    EXPECT_THAT(ParseImageReference(image, "--image"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("has an empty name, tag or digest")))
        << image;
  }
}

}  // namespace
}  // namespace psflow
