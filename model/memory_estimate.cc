#include "model/memory_estimate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace psflow {
namespace {

constexpr int64_t kFloat = sizeof(float);
constexpr int kLargestParts = 3;

}  // namespace

int OptimizerSlots(const OptimizerConfig& optimizer) {
  switch (optimizer.kind()) {
    case OptimizerConfig::MOMENTUM:
    case OptimizerConfig::ADAGRAD:
      return 1;
    case OptimizerConfig::ADAM:
    case OptimizerConfig::ADAMW:
    case OptimizerConfig::FTRL:
      return 2;
    default:
      return 0;
  }
}

MemoryEstimate EstimateMemory(const ModelDefinition& model, int64_t batch_size,
                              int optimizer_slots, int threads) {
  MemoryEstimate estimate;
  estimate.batch_size = batch_size;
  int64_t parameters = 0;
  for (const ModelPart& part : model.MemoryParts()) {
    // What the CPU backend holds whatever the batch: per thread, and once.
    // Each term below 2^61 (threads <= 256 and a part's floats far
    // smaller, or saturated), so the sum cannot overflow.
    const int64_t batch_independent =
        std::min(INT64_MAX / 1024, part.scratch_per_thread) *
            std::clamp(threads, 1, 256) +
        std::min(INT64_MAX / 1024, part.scratch_fixed);
    const int64_t activations =
        std::min(INT64_MAX / 8,
                 std::min(INT64_MAX / 8, part.FloatsForBatch(batch_size)) +
                     std::min(INT64_MAX / 8, batch_independent)) *
        kFloat;
    const int64_t bytes =
        activations + part.parameters * kWorkerCopiesPerParameter * kFloat;
    parameters += part.parameters;
    estimate.activation_bytes =
        std::min(INT64_MAX / 4, estimate.activation_bytes + activations);
    estimate.largest.push_back({part.name, bytes});
  }
  estimate.parameter_bytes = parameters * kWorkerCopiesPerParameter * kFloat;
  estimate.server_bytes = parameters * (1 + optimizer_slots) * kFloat;
  std::stable_sort(
      estimate.largest.begin(), estimate.largest.end(),
      [](const MemoryEstimate::Part& a, const MemoryEstimate::Part& b) {
        return a.bytes > b.bytes;
      });
  if (estimate.largest.size() > kLargestParts) {
    estimate.largest.resize(kLargestParts);
  }
  return estimate;
}

MemoryEstimate EstimateJobMemory(const ModelDefinition& model,
                                 const JobConfig& job) {
  return EstimateMemory(model, job.training().batch_size(),
                        OptimizerSlots(job.optimizer()),
                        std::max(1, job.training().cpu_threads()));
}

MemoryEstimate EstimateEvaluationMemory(const ModelDefinition& model,
                                        const JobConfig& job,
                                        int64_t test_examples, int threads) {
  int64_t batch = std::max(1, job.evaluation().batch_size());
  if (test_examples > 0) batch = std::min(batch, test_examples);
  return EstimateMemory(
      model, batch, /*optimizer_slots=*/0,
      std::max(1, threads > 0 ? threads : job.training().cpu_threads()));
}

absl::Status CheckEvaluationMemory(const MemoryEstimate& estimate,
                                   int64_t available,
                                   const std::string& available_source) {
  const int64_t needed = estimate.worker_bytes();
  if (available <= 0 || needed <= available) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the evaluation does not fit in memory: scoring a batch of ",
      estimate.batch_size, " test examples needs about ", FormatBytes(needed),
      " (activations ", FormatBytes(estimate.activation_bytes),
      ", the test set, read whole: ", FormatBytes(estimate.data_bytes),
      "), more than the ", FormatBytes(available), " of ", available_source,
      ". Lower evaluation.batch_size (the evaluator and the chief's own "
      "final evaluation score the test set a batch at a time), or use a "
      "smaller test set"));
}

std::string FormatBytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) {
    return absl::StrFormat("%.1f GiB", bytes / double(int64_t{1} << 30));
  }
  if (bytes >= (int64_t{1} << 20)) {
    return absl::StrFormat("%.0f MiB", bytes / double(int64_t{1} << 20));
  }
  return absl::StrFormat("%.0f KiB", bytes / 1024.0);
}

std::string DescribeMemoryEstimate(const MemoryEstimate& e) {
  return absl::StrCat("each worker needs about ", FormatBytes(e.worker_bytes()),
                      " (parameters ", FormatBytes(e.parameter_bytes),
                      ", activations for a batch of ", e.batch_size, ": ",
                      FormatBytes(e.activation_bytes), ", the process ",
                      FormatBytes(e.runtime_bytes),
                      e.data_bytes > 0 ? absl::StrCat(", the training data ",
                                                      FormatBytes(e.data_bytes))
                                       : std::string(),
                      "); the parameter servers hold ",
                      FormatBytes(e.server_bytes), " together");
}

absl::Status CheckJobMemory(const MemoryEstimate& estimate,
                            const JobConfig& job, int workers,
                            int64_t available,
                            const std::string& available_source) {
  const int64_t declared = job.training().worker_memory_mib() << 20;
  const int64_t each = estimate.worker_bytes();
  std::string problem;
  if (declared > 0 && each > declared) {
    problem = absl::StrCat("more than the ", FormatBytes(declared),
                           " each worker has (training.worker_memory_mib)");
  } else if (available > 0 && workers > 0 && each > available / workers) {
    problem =
        workers == 1
            ? absl::StrCat("more than the ", FormatBytes(available), " of ",
                           available_source)
            : absl::StrCat(workers, " workers need ",
                           FormatBytes(each * workers), ", more than the ",
                           FormatBytes(available), " of ", available_source);
  }
  if (problem.empty()) return absl::OkStatus();
  std::vector<std::string> largest;
  for (const MemoryEstimate::Part& part : estimate.largest) {
    largest.push_back(absl::StrCat(part.name, " ", FormatBytes(part.bytes)));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "the job does not fit in memory: ", DescribeMemoryEstimate(estimate),
      "; ", problem,
      ". The largest layers, for a batch: ", absl::StrJoin(largest, ", "),
      ". Lower training.batch_size, make those layers smaller (fewer "
      "filters, a stride or pooling before them), ",
      estimate.data_bytes > estimate.activation_bytes
          ? "train on less data (each worker reads the whole training file "
            "before it takes its shard), "
          : "",
      "or run the workers where there is more memory "
      "(training.worker_memory_mib declares it)"));
}

}  // namespace psflow
