// psflow's own predictions for a fixed batch, in the exported ONNX model's
// input format: what //tests:onnx_export_test hands to an independent
// runtime (tests/onnx_check/run_onnx.js) to compare with. The checkpoint
// is loaded into psflow's model (the registry's DefineModel over the
// model the checkpoint records, its values from CheckpointReader) and run
// on the CPU device, as the evaluator runs it.
//
// The result is JSON:
//   {"inputs": [{"name", "type": "float32"|"int64", "dims", "data"}...],
//    "probabilities": {"dims": [batch, classes], "data": [...]},
//    "classes": [...]}
// int64 data are strings (JSON numbers are doubles to JavaScript, and ids
// use all 63 bits).
//
// Stateless functions.
#ifndef PSFLOW_TESTS_ONNX_REFERENCE_H_
#define PSFLOW_TESTS_ONNX_REFERENCE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "data/dataset.h"

namespace psflow {
namespace testing {

// An image model's (MLP, `layers`, graph on IDX data) probabilities for
// the first `count` examples of `images`, fed as raw pixel values. The
// Model interface gives a class model's loss, not its probabilities: each
// p(c | x) is exp(-loss) of x labelled c, one example at a time.
absl::StatusOr<std::string> ImageReference(const std::string& checkpoint,
                                           const Dataset& images,
                                           int64_t count);

// A click-through-rate graph model's probabilities for `count` generated
// examples: raw integer dense columns (negative, zero, small and huge
// values), and per field a bag of 0 to 3 ids, mostly ids the checkpoint's
// tables hold, some they never saw (psflow is given the table's default
// row for those: zeros, as the ONNX model uses), padded with -1.
absl::StatusOr<std::string> CtrReference(const std::string& checkpoint,
                                         int64_t count, uint64_t seed);

// psflow's probabilities for Criteo text `text` (lines as the data files
// hold them) read by psflow's own reader; "inputs" is empty: the test
// makes them from the same lines with tools/ctr_feature_id.py. Ids the
// tables do not hold read zeros, as in the ONNX model.
absl::StatusOr<std::string> CtrTextReference(const std::string& checkpoint,
                                             const std::string& text);

}  // namespace testing
}  // namespace psflow

#endif  // PSFLOW_TESTS_ONNX_REFERENCE_H_
