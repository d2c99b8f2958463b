#include "data/batch_stream.h"

#include <pthread.h>

#include <algorithm>
#include <numeric>

#include "common/prefetch.h"
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

void BatchStream::PrefetchExample(int64_t example) const {
  constexpr int64_t kLine = 64;
  if (ctr_ != nullptr) {
    const CtrExamples& data = *ctr_;
    const float* dense = data.dense.data() + example * data.num_dense;
    for (int64_t at = 0;
         at < data.num_dense * static_cast<int64_t>(sizeof(float));
         at += kLine) {
      PrefetchForRead(reinterpret_cast<const char*>(dense) + at);
    }
    PrefetchForRead(data.offsets.data() + example * data.num_fields);
    PrefetchForRead(&data.labels[example]);
    return;
  }
  const Dataset& data = *dataset_;
  const uint8_t* src = data.features.data() + example * data.num_features;
  for (int64_t at = 0; at < data.num_features; at += kLine) {
    PrefetchForRead(src + at);
  }
  PrefetchForRead(src + data.num_features - 1);  // a row's last line
  PrefetchForRead(&data.labels[example]);
}

Batch BatchStream::TakeBuffers() {
  Batch batch;
  {
    MutexLock lock(&mu_);
    if (recycled_.empty()) return batch;
    batch = std::move(recycled_.back());
    recycled_.pop_back();
  }
  // Sizes and contents are set again; the capacities stay.
  batch.offsets.clear();
  batch.ids.clear();
  return batch;
}

void BatchStream::Recycle(Batch batch) {
  MutexLock lock(&mu_);
  // Enough for every batch that can be out at once (the ready ones, the
  // one being built, the consumer's); more are freed.
  if (static_cast<int>(recycled_.size()) < std::max(1, options_.prefetch) + 2) {
    recycled_.push_back(std::move(batch));
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
  // Named apart from the role's main thread in profiles and
  // bench/proc_cpu.py --threads.
  pthread_setname_np(pthread_self(), "batch_stream");
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
      Batch batch = TakeBuffers();
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
      // Hints run this many examples ahead of the copies.
      constexpr int64_t kAhead = 4;
      for (int64_t b = 0; b < std::min(kAhead, size); ++b) {
        PrefetchExample(order[begin + b]);
      }
      for (int64_t b = 0; b < size; ++b) {
        if (b + kAhead < size) PrefetchExample(order[begin + b + kAhead]);
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
