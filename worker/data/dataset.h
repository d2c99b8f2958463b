// An image-classification dataset held in memory as bytes (47 MB for
// Fashion-MNIST's training set), and the shard of it one worker trains on.
// Immutable after loading; share it between threads freely.
#ifndef PSFLOW_WORKER_DATA_DATASET_H_
#define PSFLOW_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psflow {

struct Dataset {
  int64_t num_examples = 0;
  int64_t num_features = 0;       // e.g. 784 for 28 x 28 images
  int num_classes = 0;            // largest label + 1
  std::vector<uint8_t> features;  // num_examples x num_features, row-major
  std::vector<uint8_t> labels;    // num_examples
};

// Reads an images file (IDX, N x ...) and a labels file (IDX, N). Errors
// name the file and the problem: missing, truncated, or images and labels
// that disagree on the number of examples.
absl::StatusOr<Dataset> LoadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path);

// Worker `index` of `count` trains on examples index, index + count, ...
// (every example in exactly one shard; sizes differ by at most one).
Dataset ShardOf(const Dataset& dataset, int index, int count);

}  // namespace psflow

#endif  // PSFLOW_WORKER_DATA_DATASET_H_
