// An image-classification dataset held in memory as bytes (47 MB for
// Fashion-MNIST's training set), and the shard of it one worker trains on.
// Immutable after loading; share it between threads freely.
#ifndef PSFLOW_DATA_DATASET_H_
#define PSFLOW_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psflow {

struct Dataset {
  int64_t num_examples = 0;
  std::vector<int64_t> example_shape;  // e.g. {28, 28}
  int64_t num_features = 0;            // their product, e.g. 784
  int num_classes = 0;                 // largest label + 1
  std::vector<uint8_t> features;       // num_examples x num_features, row-major
  std::vector<uint8_t> labels;         // num_examples
};

// Reads an images file (IDX, N x ...) and a labels file (IDX, N). Errors
// name the file and the problem: missing, truncated, or images and labels
// that disagree on the number of examples.
absl::StatusOr<Dataset> LoadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path);

// What a dataset holds, without its examples: the chief plans a job from
// this (model input, class count, epochs to steps).
struct DatasetInfo {
  int64_t num_examples = 0;
  std::vector<int64_t> example_shape;
  int num_classes = 0;          // largest label + 1
  std::vector<uint8_t> labels;  // one byte per example
};

// Reads both files through as LoadIdxDataset does, with its errors, but
// holds none of the data (for checks: psctl config check). Returns the
// number of examples.
absl::StatusOr<int64_t> CheckIdxDataset(const std::string& images_path,
                                        const std::string& labels_path);

// Reads only the images file's header and the labels (one byte each), with
// the same errors as LoadIdxDataset for the parts it reads.
absl::StatusOr<DatasetInfo> DescribeIdxDataset(const std::string& images_path,
                                               const std::string& labels_path);

// InvalidArgument naming `labels_path` and the first record whose label is
// outside [0, num_classes), and the fix; OK when all are inside.
absl::Status CheckLabels(const std::vector<uint8_t>& labels, int num_classes,
                         const std::string& labels_path);

// Worker `index` of `count` trains on examples index, index + count, ...
// (every example in exactly one shard; sizes differ by at most one).
Dataset ShardOf(const Dataset& dataset, int index, int count);

}  // namespace psflow

#endif  // PSFLOW_DATA_DATASET_H_
