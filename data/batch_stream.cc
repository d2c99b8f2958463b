#include "data/batch_stream.h"

#include <algorithm>
#include <numeric>

#include "common/splitmix64.h"

namespace psflow {

std::vector<int64_t> BatchStream::EpochOrder(int64_t num_examples,
                                             uint64_t seed, int64_t epoch,
                                             bool shuffle) {
  std::vector<int64_t> order(num_examples);
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle) return order;
  uint64_t state = seed * 0x100000001b3ull + static_cast<uint64_t>(epoch);
  for (int64_t i = num_examples - 1; i > 0; --i) {
    const int64_t j =
        static_cast<int64_t>(SplitMix64(state) % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

BatchStream::BatchStream(std::shared_ptr<const Dataset> dataset,
                         const Options& options)
    : dataset_(std::move(dataset)), options_(options) {
  producer_ = std::thread([this] { Produce(); });
}

BatchStream::BatchStream(std::shared_ptr<const CtrExamples> examples,
                         const Options& options)
    : ctr_(std::move(examples)), options_(options) {
  producer_ = std::thread([this] { Produce(); });
}

void BatchStream::FillImage(int64_t example, int64_t row, Batch& batch) const {
  const Dataset& data = *dataset_;
  const int64_t features = data.num_features;
  const uint8_t* src = &data.features[example * features];
  float* dst = &batch.features[row * features];
  for (int64_t f = 0; f < features; ++f) {
    dst[f] = src[f] * options_.feature_scale;
  }
  batch.labels[row] = data.labels[example];
}

void BatchStream::FillCtr(int64_t example, int64_t row, Batch& batch) const {
  const CtrExamples& data = *ctr_;
  std::copy_n(data.dense.data() + example * data.num_dense, data.num_dense,
              batch.features.data() + row * data.num_dense);
  batch.labels[row] = data.labels[example];
  // The example's bags lie back to back: one copy for all its ids, its
  // offsets shifted to where they land in the batch.
  const absl::Span<const int64_t> ids = data.IdsOf(example);
  const int64_t* offsets = data.offsets.data() + example * data.num_fields;
  const int64_t shift = static_cast<int64_t>(batch.ids.size()) - offsets[0];
  batch.ids.insert(batch.ids.end(), ids.begin(), ids.end());
  for (int f = 1; f <= data.num_fields; ++f) {
    batch.offsets.push_back(offsets[f] + shift);
  }
}

BatchStream::~BatchStream() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  producer_.join();
}

void BatchStream::Produce() {
  const int64_t num_examples =
      ctr_ != nullptr ? ctr_->num_examples : dataset_->num_examples;
  const int64_t features =
      ctr_ != nullptr ? ctr_->num_dense : dataset_->num_features;
  const int64_t batch_size = std::max(1, options_.batch_size);
  for (int64_t epoch = 0; options_.epochs == 0 || epoch < options_.epochs;
       ++epoch) {
    const std::vector<int64_t> order =
        EpochOrder(num_examples, options_.seed, epoch, options_.shuffle);
    for (int64_t begin = 0; begin < num_examples; begin += batch_size) {
      const int64_t size = std::min(batch_size, num_examples - begin);
      if (size < batch_size && options_.drop_remainder) break;
      Batch batch;
      batch.size = static_cast<int>(size);
      batch.epoch = epoch;
      batch.features.resize(size * features);
      batch.labels.resize(size);
      if (ctr_ != nullptr) {
        batch.num_fields = ctr_->num_fields;
        batch.offsets.reserve(size * ctr_->num_fields + 1);
        batch.offsets.push_back(0);
        // The data set's mean ids per example, and some room: one
        // allocation for a batch's ids.
        batch.ids.reserve(
            static_cast<size_t>((ctr_->ids.size() * size * 9 / 8) /
                                    std::max<int64_t>(1, num_examples) +
                                ctr_->num_fields));
      }
      for (int64_t b = 0; b < size; ++b) {
        if (ctr_ != nullptr) {
          FillCtr(order[begin + b], b, batch);
        } else {
          FillImage(order[begin + b], b, batch);
        }
      }
      MutexLock lock(&mu_);
      mu_.Await(Condition(
          +[](BatchStream* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return s->stop_ || static_cast<int>(s->ready_.size()) <
                                   std::max(1, s->options_.prefetch);
          },
          this));
      if (stop_) return;
      ready_.push_back(std::move(batch));
    }
    if (num_examples == 0) break;
  }
  MutexLock lock(&mu_);
  finished_ = true;
}

std::optional<Batch> BatchStream::Next() {
  MutexLock lock(&mu_);
  mu_.Await(Condition(
      +[](BatchStream* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !s->ready_.empty() || s->finished_;
      },
      this));
  if (ready_.empty()) return std::nullopt;
  Batch batch = std::move(ready_.front());
  ready_.pop_front();
  return batch;
}

}  // namespace psflow
