#include "evaluation/test_data.h"

#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job/job_config.h"
#include "common/status_macros.h"
#include "data/criteo.h"
#include "data/training_data.h"
#include "evaluation/ctr_evaluation.h"
#include "evaluation/image_evaluation.h"

namespace psflow {

absl::StatusOr<TestData> LoadTestData(const JobSpec& spec) {
  const JobConfig& job = spec.config();
  if (!HasTestData(job)) {
    return absl::FailedPreconditionError(
        "the job config names no test data (data.test_images and "
        "data.test_labels, or data.test_path)");
  }
  TestData test;
  if (job.data().format() == DataConfig::CRITEO) {
    test.ctr = true;
    ASSIGN_OR_RETURN(test.examples, LoadCriteoFile(job.data().test_path(),
                                                   CriteoFormatOf(job.data())));
    RETURN_IF_ERROR(CheckSameExamplesAsTheChief(
        spec.num_test_examples(), test.examples.num_examples,
        absl::StrCat("the test data ", job.data().test_path())));
    return test;
  }
  ASSIGN_OR_RETURN(test.images, LoadIdxDataset(job.data().test_images(),
                                               job.data().test_labels()));
  RETURN_IF_ERROR(CheckSameExamplesAsTheChief(
      spec.num_test_examples(), test.images.num_examples,
      absl::StrCat("the test data ", job.data().test_images(), " and ",
                   job.data().test_labels())));
  if (!absl::c_equal(test.images.example_shape, spec.example_shape())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the test data's examples have shape [",
        absl::StrJoin(test.images.example_shape, ", "),
        "] but the model takes [", absl::StrJoin(spec.example_shape(), ", "),
        "]; use the test split of the training data's set"));
  }
  RETURN_IF_ERROR(CheckLabels(test.images.labels,
                              static_cast<int>(spec.num_classes()),
                              job.data().test_labels()));
  return test;
}

absl::StatusOr<EvaluationReport> EvaluateLiveModel(const JobSpec& spec,
                                                   ParameterClient& client,
                                                   Device& device,
                                                   const TestData& test) {
  return test.ctr ? EvaluateCtrOnce(spec, client, device, test.examples)
                  : EvaluateOnce(spec, client, device, test.images);
}

}  // namespace psflow
