// batch_stream_bench: what a worker's batch producer (data/batch_stream.h)
// costs per example, on an image data set the size of Fashion-MNIST's
// training set (60,000 x 784 bytes: larger than most L2s and, beside a
// job's other processes, than its share of L3) in the default job's batch
// of 64. The consumer takes each batch and hands it back, as the trainer
// does. What is timed is the producer thread's own CPU (its
// /proc/self/task/<tid>/schedstat, found by its name "batch_stream"), per
// example. With --consumer_us the consumer computes (spins) that long per
// batch, as a trainer's step does, so the producer runs ahead, fills its
// queue and waits to be woken, as in a job.
//
//   bazel build --config=opt //bench:batch_stream_bench
//   bazel-bin/bench/batch_stream_bench --rounds=5 --consumer_us=1300
//
// Prints each round and the median. Pixel values are random: the cost is
// the copy, the conversion and the cache misses of a shuffled order, not
// the values.
#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/process_setup.h"
#include "data/batch_stream.h"
#include "data/dataset.h"

ABSL_FLAG(int, rounds, 5, "Timed rounds (an epoch's batches each)");
ABSL_FLAG(int, batch_size, 64, "Examples per batch");
ABSL_FLAG(int64_t, examples, 60000, "Examples in the data set");
ABSL_FLAG(int, consumer_us, 0,
          "Microseconds the consumer computes (spins) per batch: 0 takes "
          "batches as fast as they come; a trainer's step (about 1300 in the "
          "default job on 2 cores) keeps the queue full, so that the "
          "producer waits and is woken as in a job");

namespace psflow {
namespace {

// CPU seconds of this process's thread named `name` (the kernel's
// schedstat: nanoseconds on a CPU, unlike stat's 10 ms ticks), or -1.
double ThreadCpuSeconds(const std::string& name) {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  double seconds = -1;
  while (dirent* entry = readdir(tasks)) {
    const std::string task = absl::StrCat("/proc/self/task/", entry->d_name);
    std::ifstream comm(task + "/comm");
    std::string thread_name;
    if (!std::getline(comm, thread_name) || thread_name != name) continue;
    std::ifstream schedstat(task + "/schedstat");
    double on_cpu_ns = 0;
    if (schedstat >> on_cpu_ns) seconds = on_cpu_ns * 1e-9;
  }
  closedir(tasks);
  return seconds;
}

// Keeps this thread busy for `us` microseconds, as a step's compute.
void Spin(int us) {
  if (us <= 0) return;
  const absl::Time end = absl::Now() + absl::Microseconds(us);
  while (absl::Now() < end) {
  }
}

int Main() {
  SetUpProcessForBulkTransfers();  // as every role process
  auto dataset = std::make_shared<Dataset>();
  dataset->num_examples = absl::GetFlag(FLAGS_examples);
  dataset->example_shape = {28, 28};
  dataset->num_features = 784;
  dataset->num_classes = 10;
  std::mt19937_64 random(1);
  dataset->features.resize(dataset->num_examples * dataset->num_features);
  for (uint8_t& pixel : dataset->features) pixel = random() & 0xff;
  dataset->labels.resize(dataset->num_examples);
  for (uint8_t& label : dataset->labels) label = random() % 10;

  const int consumer_us = absl::GetFlag(FLAGS_consumer_us);
  std::vector<double> ns_per_example;
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    BatchStream::Options options;
    options.batch_size = absl::GetFlag(FLAGS_batch_size);
    options.seed = round;
    // Endless, so that the producer is still there to be read once the
    // consumer has taken an epoch's batches (it has built at most its
    // queue's worth more: under 1% of an epoch at the defaults).
    options.epochs = 0;
    const int64_t batches =
        std::max<int64_t>(1, dataset->num_examples / options.batch_size);
    const absl::Time start = absl::Now();
    int64_t examples = 0;
    double cpu = -1;
    {
      BatchStream stream(dataset, options);
      for (int64_t i = 0; i < batches; ++i) {
        std::optional<Batch> batch = stream.Next();
        examples += batch->size;
        Spin(consumer_us);
        stream.Recycle(*std::move(batch));
      }
      cpu = ThreadCpuSeconds("batch_stream");
    }
    if (cpu < 0) {
      std::fprintf(stderr, "no thread named batch_stream in this process\n");
      return 1;
    }
    const double wall = absl::ToDoubleSeconds(absl::Now() - start);
    ns_per_example.push_back(1e9 * cpu / std::max<int64_t>(1, examples));
    std::printf(
        "round %d: %lld examples, producer CPU %.1f ns/example, wall %.1f "
        "ns/example\n",
        round + 1, static_cast<long long>(examples), ns_per_example.back(),
        1e9 * wall / std::max<int64_t>(1, examples));
  }
  std::sort(ns_per_example.begin(), ns_per_example.end());
  std::printf("median producer CPU per example: %.1f ns\n",
              ns_per_example[ns_per_example.size() / 2]);
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return psflow::Main();
}
