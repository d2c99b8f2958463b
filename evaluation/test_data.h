// A job's held-out data, read and checked against the job's model the same
// way for the evaluator and for the chief's own final evaluation: IDX
// images (shape and labels checked against the job spec) or Criteo
// click-through-rate examples, and one evaluation of the live model on it.
//
// TestData is immutable once loaded; share it between threads freely.
#ifndef PSFLOW_EVALUATION_TEST_DATA_H_
#define PSFLOW_EVALUATION_TEST_DATA_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "data/ctr_examples.h"
#include "data/dataset.h"
#include "model/device/device.h"
#include "proto/coordinator.pb.h"

namespace psflow {

struct TestData {
  bool ctr = false;      // which of the two holds the examples
  Dataset images;        // image jobs (data.format IDX)
  CtrExamples examples;  // click-through-rate jobs (data.format CRITEO)

  int64_t num_examples() const {
    return ctr ? examples.num_examples : images.num_examples;
  }
};

// Reads the test files the job config names. FailedPrecondition when it
// names none (HasTestData), or when the images' shape or labels do not
// fit the job's model; the readers' errors (naming file and record)
// otherwise.
absl::StatusOr<TestData> LoadTestData(const JobSpec& spec);

// One evaluation of the live model on the parameter servers (a consistent
// snapshot of the dense variables; a CTR model's rows pulled without
// creating any) on every test example.
absl::StatusOr<EvaluationReport> EvaluateLiveModel(const JobSpec& spec,
                                                   ParameterClient& client,
                                                   Device& device,
                                                   const TestData& test);

}  // namespace psflow

#endif  // PSFLOW_EVALUATION_TEST_DATA_H_
