#include "data/dataset.h"

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "common/status_matchers.h"
#include "data/batch_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kTrainImages[] =
    "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
constexpr char kTrainLabels[] =
    "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz";
constexpr char kTestLabels[] =
    "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";

Dataset Tiny(int n, int features) {
  Dataset d;
  d.num_examples = n;
  d.num_features = features;
  d.num_classes = 10;
  for (int i = 0; i < n; ++i) {
    for (int f = 0; f < features; ++f) d.features.push_back((i * 7 + f) % 256);
    d.labels.push_back(i % 10);
  }
  return d;
}

TEST(DatasetTest, LoadsFashionMnist) {
  ASSERT_OK_AND_ASSIGN(Dataset d, LoadIdxDataset(kTrainImages, kTrainLabels));
  EXPECT_EQ(d.num_examples, 60000);
  EXPECT_EQ(d.num_features, 784);
  EXPECT_EQ(d.example_shape, (std::vector<int64_t>{28, 28}));
  EXPECT_EQ(d.num_classes, 10);
}

TEST(DatasetTest, DescribingReadsTheSameShapeAndClassesAsLoading) {
  ASSERT_OK_AND_ASSIGN(DatasetInfo info,
                       DescribeIdxDataset(kTrainImages, kTrainLabels));
  EXPECT_EQ(info.num_examples, 60000);
  EXPECT_EQ(info.example_shape, (std::vector<int64_t>{28, 28}));
  EXPECT_EQ(info.num_classes, 10);
  EXPECT_THAT(DescribeIdxDataset(kTrainImages, kTestLabels),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds 60000 examples but")));
  EXPECT_THAT(DescribeIdxDataset("/nonexistent/images.gz", kTrainLabels),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(DatasetTest, ImagesAndLabelsMustAgree) {
  EXPECT_THAT(LoadIdxDataset(kTrainImages, kTestLabels),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds 60000 examples but")));
  EXPECT_THAT(LoadIdxDataset(kTrainLabels, kTrainLabels),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is it a labels file?")));
}

TEST(DatasetTest, LabelsOutsideTheClassesNameTheFileAndRecord) {
  ASSERT_OK_AND_ASSIGN(DatasetInfo info,
                       DescribeIdxDataset(kTrainImages, kTrainLabels));
  ASSERT_EQ(info.labels.size(), 60000u);
  EXPECT_OK(CheckLabels(info.labels, 10, kTrainLabels));
  // Fashion-MNIST's first record is an ankle boot (class 9).
  ASSERT_EQ(info.labels[0], 9);
  EXPECT_THAT(CheckLabels(info.labels, 9, kTrainLabels),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(std::string(kTrainLabels) +
                                       " record 0 has label 9"),
                             HasSubstr("outside the job's 9 classes"),
                             HasSubstr("data.num_classes"))));
  std::vector<uint8_t> damaged = {1, 2, 200, 3};
  EXPECT_THAT(CheckLabels(damaged, 10, "labels.idx"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("labels.idx record 2 has label 200")));
}

TEST(DatasetTest, ShardsPartitionTheExamples) {
  Dataset d = Tiny(10, 3);
  Dataset a = ShardOf(d, 0, 3), b = ShardOf(d, 1, 3), c = ShardOf(d, 2, 3);
  EXPECT_EQ(a.num_examples, 4);
  EXPECT_EQ(b.num_examples, 3);
  EXPECT_EQ(c.num_examples, 3);
  // Shard 1 holds examples 1, 4, 7.
  EXPECT_EQ(b.labels[2], 7);
  EXPECT_EQ(b.features[2 * 3], d.features[7 * 3]);
  // Each held once, without a growing vector's slack.
  EXPECT_EQ(a.features.capacity(), a.features.size());
  EXPECT_EQ(c.labels.capacity(), c.labels.size());
  // More shards than examples: empty ones.
  EXPECT_EQ(ShardOf(d, 11, 12).num_examples, 0);
}

TEST(BatchStreamTest, EpochOrdersArePermutationsFixedBySeedAndEpoch) {
  auto a = BatchStream::EpochOrder(1000, 42, 0, true);
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 1000u);
  EXPECT_EQ(a, BatchStream::EpochOrder(1000, 42, 0, true));
  EXPECT_NE(a, BatchStream::EpochOrder(1000, 42, 1, true));
  EXPECT_NE(a, BatchStream::EpochOrder(1000, 43, 0, true));
  auto plain = BatchStream::EpochOrder(5, 42, 0, false);
  EXPECT_EQ(plain, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(BatchStreamTest, BatchesCarryScaledFeaturesAndTheirLabels) {
  auto d = std::make_shared<Dataset>(Tiny(10, 3));
  BatchStream::Options options;
  options.batch_size = 4;
  options.seed = 7;
  options.epochs = 1;
  BatchStream stream(d, options);
  auto order = BatchStream::EpochOrder(10, 7, 0, true);
  int seen = 0;
  while (std::optional<Batch> batch = stream.Next()) {
    ASSERT_EQ(batch->size, 4);
    for (int b = 0; b < batch->size; ++b) {
      const int64_t example = order[seen + b];
      EXPECT_EQ(batch->labels[b], d->labels[example]);
      EXPECT_FLOAT_EQ(batch->features[b * 3 + 1],
                      d->features[example * 3 + 1] / 255.0f);
    }
    seen += batch->size;
  }
  EXPECT_EQ(seen, 8) << "the last partial batch is dropped for training";
}

TEST(BatchStreamTest, EvaluationKeepsTheLastPartialBatch) {
  auto d = std::make_shared<Dataset>(Tiny(10, 2));
  BatchStream::Options options;
  options.batch_size = 4;
  options.shuffle = false;
  options.drop_remainder = false;
  options.epochs = 1;
  BatchStream stream(d, options);
  std::vector<int> sizes;
  while (auto batch = stream.Next()) sizes.push_back(batch->size);
  EXPECT_EQ(sizes, (std::vector<int>{4, 4, 2}));
}

TEST(BatchStreamTest, EndlessStreamStopsPromptlyWhenDestroyed) {
  auto d = std::make_shared<Dataset>(Tiny(100, 8));
  BatchStream::Options options;
  options.batch_size = 10;
  auto stream = std::make_unique<BatchStream>(d, options);
  for (int i = 0; i < 25; ++i) {
    std::optional<Batch> batch = stream->Next();
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ(batch->epoch, i / 10);
  }
  stream.reset();  // Must not hang with the producer blocked on a full queue.
}

void ExpectSameBatch(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.num_fields, b.num_fields);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.ids, b.ids);
}

// Every batch of `recycling` (whose consumer hands each batch back) equals
// the same batch of `fresh` (whose consumer drops them).
void ExpectRecyclingChangesNothing(BatchStream& fresh, BatchStream& recycling) {
  int batches = 0;
  while (std::optional<Batch> expected = fresh.Next()) {
    std::optional<Batch> batch = recycling.Next();
    ASSERT_TRUE(batch.has_value()) << "batch " << batches;
    ExpectSameBatch(*batch, *expected);
    recycling.Recycle(*std::move(batch));
    ++batches;
  }
  EXPECT_FALSE(recycling.Next().has_value());
  EXPECT_GT(batches, 6) << "more batches than the recycled buffers";
}

// A recycled batch's buffers are refilled whole: partial batches (smaller)
// followed by full ones (larger) across epochs included.
TEST(BatchStreamTest, RecycledImageBatchesEqualFreshOnes) {
  auto d = std::make_shared<Dataset>(Tiny(23, 5));
  BatchStream::Options options;
  options.batch_size = 4;
  options.seed = 3;
  options.epochs = 3;
  options.drop_remainder = false;
  options.prefetch = 1;
  BatchStream fresh(d, options), recycling(d, options);
  ExpectRecyclingChangesNothing(fresh, recycling);
}

// CTR examples batch with their dense features, labels and bags of ids,
// every example exactly once per epoch, bags kept whole and in order.
TEST(BatchStreamTest, CtrBatchesCarryEveryExamplesBags) {
  auto examples = std::make_shared<CtrExamples>();
  examples->num_dense = 2;
  examples->num_fields = 2;
  examples->num_examples = 5;
  examples->offsets.push_back(0);
  for (int64_t i = 0; i < 5; ++i) {
    examples->dense.push_back(static_cast<float>(i));
    examples->dense.push_back(static_cast<float>(-i));
    examples->labels.push_back(i % 2);
    // Field 0: i ids (i, i, ...); field 1: one id 100 + i.
    for (int64_t k = 0; k < i; ++k) examples->ids.push_back(i);
    examples->offsets.push_back(static_cast<int64_t>(examples->ids.size()));
    examples->ids.push_back(100 + i);
    examples->offsets.push_back(static_cast<int64_t>(examples->ids.size()));
  }
  BatchStream::Options options;
  options.batch_size = 2;
  options.epochs = 1;
  options.drop_remainder = false;
  options.seed = 7;
  BatchStream stream(examples, options);
  std::vector<int64_t> seen;
  while (std::optional<Batch> batch = stream.Next()) {
    ASSERT_EQ(batch->num_fields, 2);
    ASSERT_EQ(batch->offsets.size(), static_cast<size_t>(batch->size * 2 + 1));
    EXPECT_EQ(batch->offsets.back(), static_cast<int64_t>(batch->ids.size()));
    for (int b = 0; b < batch->size; ++b) {
      const int64_t i = static_cast<int64_t>(batch->features[b * 2]);
      seen.push_back(i);
      EXPECT_EQ(batch->features[b * 2 + 1], -static_cast<float>(i));
      EXPECT_EQ(batch->labels[b], i % 2);
      const int64_t field0 = batch->offsets[b * 2 + 1] - batch->offsets[b * 2];
      EXPECT_EQ(field0, i);
      EXPECT_EQ(batch->ids[batch->offsets[b * 2 + 1]], 100 + i);
    }
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4}));

  // A recycled batch's bags start empty: ids and offsets are those of its
  // own examples only.
  options.epochs = 4;
  BatchStream fresh(examples, options), recycling(examples, options);
  ExpectRecyclingChangesNothing(fresh, recycling);
}

}  // namespace
}  // namespace psflow
