#include "worker/data/dataset.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/data/idx_file.h"

namespace psflow {

absl::StatusOr<Dataset> LoadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path) {
  absl::StatusOr<IdxArray> images = ReadIdxFile(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<IdxArray> labels = ReadIdxFile(labels_path);
  if (!labels.ok()) return labels.status();
  if (images->dims.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, " has shape [", absl::StrJoin(images->dims, ", "),
        "]; an images file has an example dimension and at least one "
        "feature dimension (is it a labels file?)"));
  }
  if (labels->dims.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_path, " has shape [", absl::StrJoin(labels->dims, ", "),
        "]; a labels file is one-dimensional (is it an images file?)"));
  }
  if (images->dims[0] != labels->dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, " holds ", images->dims[0], " examples but ", labels_path,
        " holds ", labels->dims[0],
        " labels; they must come from the same split (train or test)"));
  }
  Dataset dataset;
  dataset.num_examples = images->dims[0];
  dataset.num_features = 1;
  for (size_t d = 1; d < images->dims.size(); ++d) {
    dataset.num_features *= images->dims[d];
  }
  dataset.features = std::move(images->data);
  dataset.labels = std::move(labels->data);
  dataset.num_classes =
      dataset.labels.empty()
          ? 0
          : *std::max_element(dataset.labels.begin(), dataset.labels.end()) + 1;
  return dataset;
}

Dataset ShardOf(const Dataset& dataset, int index, int count) {
  Dataset shard;
  shard.num_features = dataset.num_features;
  shard.num_classes = dataset.num_classes;
  for (int64_t i = index; i < dataset.num_examples; i += count) {
    shard.features.insert(
        shard.features.end(),
        dataset.features.begin() + i * dataset.num_features,
        dataset.features.begin() + (i + 1) * dataset.num_features);
    shard.labels.push_back(dataset.labels[i]);
  }
  shard.num_examples = static_cast<int64_t>(shard.labels.size());
  return shard;
}

}  // namespace psflow
