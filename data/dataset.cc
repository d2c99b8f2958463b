#include "data/dataset.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/idx_file.h"

namespace psflow {

namespace {

// Checks that images (dims) and labels (dims) describe one split.
absl::Status CheckPair(const std::string& images_path,
                       const std::vector<int64_t>& images,
                       const std::string& labels_path,
                       const std::vector<int64_t>& labels) {
  if (images.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, " has shape [", absl::StrJoin(images, ", "),
        "]; an images file has an example dimension and at least one "
        "feature dimension (is it a labels file?)"));
  }
  if (labels.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_path, " has shape [", absl::StrJoin(labels, ", "),
        "]; a labels file is one-dimensional (is it an images file?)"));
  }
  if (images[0] != labels[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, " holds ", images[0], " examples but ", labels_path,
        " holds ", labels[0],
        " labels; they must come from the same split (train or test)"));
  }
  return absl::OkStatus();
}

// The two headers describe one split, before any data is read: a
// mismatched pair is refused without holding the images.
absl::Status CheckPairedHeaders(const std::string& images_path,
                                const std::string& labels_path) {
  absl::StatusOr<std::vector<int64_t>> images = ReadIdxHeader(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<std::vector<int64_t>> labels = ReadIdxHeader(labels_path);
  if (!labels.ok()) return labels.status();
  return CheckPair(images_path, *images, labels_path, *labels);
}

int NumClasses(const std::vector<uint8_t>& labels) {
  return labels.empty() ? 0
                        : *std::max_element(labels.begin(), labels.end()) + 1;
}

}  // namespace

absl::StatusOr<Dataset> LoadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path) {
  absl::Status paired = CheckPairedHeaders(images_path, labels_path);
  if (!paired.ok()) return paired;
  absl::StatusOr<IdxArray> images = ReadIdxFile(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<IdxArray> labels = ReadIdxFile(labels_path);
  if (!labels.ok()) return labels.status();
  paired = CheckPair(images_path, images->dims, labels_path, labels->dims);
  if (!paired.ok()) return paired;
  Dataset dataset;
  dataset.num_examples = images->dims[0];
  dataset.example_shape.assign(images->dims.begin() + 1, images->dims.end());
  dataset.num_features = 1;
  for (int64_t d : dataset.example_shape) dataset.num_features *= d;
  dataset.features = std::move(images->data);
  dataset.labels = std::move(labels->data);
  dataset.num_classes = NumClasses(dataset.labels);
  return dataset;
}

absl::StatusOr<int64_t> CheckIdxDataset(const std::string& images_path,
                                        const std::string& labels_path) {
  absl::Status paired = CheckPairedHeaders(images_path, labels_path);
  if (!paired.ok()) return paired;
  absl::StatusOr<std::vector<int64_t>> image_dims = CheckIdxFile(images_path);
  if (!image_dims.ok()) return image_dims.status();
  absl::StatusOr<std::vector<int64_t>> label_dims = CheckIdxFile(labels_path);
  if (!label_dims.ok()) return label_dims.status();
  return (*image_dims)[0];
}

absl::StatusOr<DatasetInfo> DescribeIdxDataset(const std::string& images_path,
                                               const std::string& labels_path) {
  absl::StatusOr<std::vector<int64_t>> images = ReadIdxHeader(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<IdxArray> labels = ReadIdxFile(labels_path);
  if (!labels.ok()) return labels.status();
  absl::Status paired =
      CheckPair(images_path, *images, labels_path, labels->dims);
  if (!paired.ok()) return paired;
  DatasetInfo info;
  info.num_examples = (*images)[0];
  info.example_shape.assign(images->begin() + 1, images->end());
  info.num_classes = NumClasses(labels->data);
  info.labels = std::move(labels->data);
  return info;
}

absl::Status CheckLabels(const std::vector<uint8_t>& labels, int num_classes,
                         const std::string& labels_path) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          labels_path, " record ", i, " has label ",
          static_cast<int>(labels[i]), ", outside the job's ", num_classes,
          " classes [0, ", num_classes,
          "); is it the right labels file? (data.num_classes sets the "
          "classes; without it the training labels decide)"));
    }
  }
  return absl::OkStatus();
}

Dataset ShardOf(const Dataset& dataset, int index, int count) {
  Dataset shard;
  shard.example_shape = dataset.example_shape;
  shard.num_features = dataset.num_features;
  shard.num_classes = dataset.num_classes;
  // Every shard example once, without the doubling of a growing vector.
  const int64_t examples =
      index < dataset.num_examples
          ? (dataset.num_examples - index + count - 1) / count
          : 0;
  shard.features.reserve(static_cast<size_t>(examples * dataset.num_features));
  shard.labels.reserve(static_cast<size_t>(examples));
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
