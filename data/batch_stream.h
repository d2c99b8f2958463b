// Turns a dataset into a stream of training or evaluation batches, built on
// a background thread so the next batches are ready when the trainer asks.
// An image dataset gives features and class labels; click-through-rate
// examples (data/ctr_examples.h) give dense features, 0/1 labels and every
// example's bags of ids (Batch::offsets, Batch::ids).
//
// Training streams reshuffle every epoch with a permutation derived from
// (seed, epoch) only, so a run is reproducible and every worker of a job
// that uses the same seed shuffles its own shard the same way. Features are
// scaled from bytes to [0, 1].
//
// Next() and Recycle() may be called from one thread at a time; the
// destructor stops the background thread and returns promptly.
#ifndef PSFLOW_DATA_BATCH_STREAM_H_
#define PSFLOW_DATA_BATCH_STREAM_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "data/ctr_examples.h"
#include "data/dataset.h"

namespace psflow {

struct Batch {
  int size = 0;
  std::vector<float> features;  // size x num_features (CTR: dense ones)
  std::vector<int32_t> labels;  // size
  int64_t epoch = 0;
  // CTR examples only: field f of example b holds ids[offsets[b *
  // num_fields + f] .. offsets[b * num_fields + f + 1]).
  int num_fields = 0;
  std::vector<int64_t> offsets;  // size * num_fields + 1
  std::vector<int64_t> ids;
};

class BatchStream {
 public:
  struct Options {
    int batch_size = 64;
    uint64_t seed = 0;
    bool shuffle = true;
    // Drop the last batch of an epoch when it is smaller than batch_size
    // (training); keep it for evaluation.
    bool drop_remainder = true;
    // Epochs to produce; 0 means without end.
    int64_t epochs = 0;
    // Batches prepared ahead of the consumer.
    int prefetch = 4;
    // Each pixel byte becomes byte * feature_scale: the model's
    // ModelDefinition::feature_scale() (1/255, or 1 for models that
    // rescale their input themselves).
    float feature_scale = 1.0f / 255;
  };

  BatchStream(std::shared_ptr<const Dataset> dataset, const Options& options);
  // Batches of click-through-rate examples (feature_scale is not used:
  // their dense features are already transformed).
  BatchStream(std::shared_ptr<const CtrExamples> examples,
              const Options& options);
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;
  ~BatchStream();

  // The next batch; nullopt once `epochs` epochs have been produced.
  std::optional<Batch> Next();

  // Hands a batch from Next() back once it is used: a later batch is
  // built in its buffers, which saves the producer an allocation and the
  // zeroing of every feature and keeps the buffers warm in the caches
  // (bench/batch_stream_bench). Optional: a batch not handed back is
  // simply freed.
  void Recycle(Batch batch);

  // The order in which epoch `epoch` visits the examples.
  static std::vector<int64_t> EpochOrder(int64_t num_examples, uint64_t seed,
                                         int64_t epoch, bool shuffle);

 private:
  void Produce();
  // A recycled batch emptied for reuse, or a new one.
  Batch TakeBuffers();
  // Hints the caches about example `example`'s bytes, a few examples
  // before FillImage/FillCtr reads them: a shuffled order misses on every
  // example, and those misses were most of the producer's time.
  void PrefetchExample(int64_t example) const;
  // Example `example` of the dataset into row `row` of `batch`.
  void FillImage(int64_t example, int64_t row, Batch& batch) const;
  void FillCtr(int64_t example, int64_t row, Batch& batch) const;

  const std::shared_ptr<const Dataset> dataset_;  // or
  const std::shared_ptr<const CtrExamples> ctr_;  // the other
  const Options options_;
  Mutex mu_;
  std::deque<Batch> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<Batch> recycled_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread producer_;
};

}  // namespace psflow

#endif  // PSFLOW_DATA_BATCH_STREAM_H_
