// How much memory a job's worker will need, estimated from its model and
// batch before anything starts: a job that cannot fit is refused with the
// figures and its largest layers, instead of growing a worker until the
// kernel kills it.
//
// A worker holds, per variable float: the model's device copy and its
// gradient, the pulled values twice (the next step's prefetch beside the
// current one) and the gradient to push: 5 floats. Per example of a
// batch, what the model's parts allocate (ModelDefinition::MemoryParts:
// every layer's outputs, their gradients and its kernel's scratch, such as
// a convolution's patches). Plus a fixed allowance for the process itself
// (libraries, threads, the data shard's index), and the training data it
// reads whole before it takes its shard. The parameter servers together
// hold the values and the optimizer's slots.
//
// An estimate, not a bound: it is meant to be within tens of percent of
// what a worker's resident memory grows to (bench/RESULTS.md), and to
// refuse only jobs that are clearly too large.
#ifndef PSFLOW_MODEL_MEMORY_ESTIMATE_H_
#define PSFLOW_MODEL_MEMORY_ESTIMATE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/model.h"
#include "proto/job_config.pb.h"

namespace psflow {

// Host copies and device copies of each variable float on a worker.
inline constexpr int64_t kWorkerCopiesPerParameter = 5;
// The process beyond the model: libraries, gRPC, threads, the data shard.
inline constexpr int64_t kWorkerRuntimeBytes = int64_t{256} << 20;

struct MemoryEstimate {
  int64_t batch_size = 0;
  int64_t parameter_bytes = 0;   // the worker's copies of the variables
  int64_t activation_bytes = 0;  // a batch's outputs, gradients, scratch
  int64_t runtime_bytes = kWorkerRuntimeBytes;
  // The training data a worker holds (data/training_data.h,
  // WorkerDataBytes); 0 when not known.
  int64_t data_bytes = 0;
  int64_t server_bytes = 0;  // values and optimizer slots, all servers
  struct Part {
    std::string name;
    int64_t bytes = 0;  // on a worker, for the batch
  };
  std::vector<Part> largest;  // the model's largest parts, largest first

  int64_t worker_bytes() const {
    // Each part saturates below 2^62: their sum could not fit int64.
    int64_t sum = 0;
    for (int64_t part :
         {parameter_bytes, activation_bytes, runtime_bytes, data_bytes}) {
      sum += std::min(int64_t{1} << 60, std::max<int64_t>(0, part));
    }
    return sum;
  }
};

// The evaluation's memory, on the evaluator (or the chief, which
// evaluates the final model itself when the evaluator does not): the
// model for a batch of evaluation.batch_size, at most `test_examples`
// when known (> 0), as the evaluation instantiates it, and the process;
// its per-thread scratch for `threads` compute threads (0: the job's
// training.cpu_threads; the chief's own evaluation uses its host's
// cores).
MemoryEstimate EstimateEvaluationMemory(const ModelDefinition& model,
                                        const JobConfig& job,
                                        int64_t test_examples, int threads = 0);

// ResourceExhausted naming evaluation.batch_size when that evaluation
// needs more than `available` bytes (`available_source` says whose).
absl::Status CheckEvaluationMemory(const MemoryEstimate& estimate,
                                   int64_t available,
                                   const std::string& available_source);

// Optimizer slots per variable float on the servers (Adam: 2).
int OptimizerSlots(const OptimizerConfig& optimizer);

// `threads`: the CPU backend's threads (training.cpu_threads), each
// holding ModelPart::scratch_per_thread.
MemoryEstimate EstimateMemory(const ModelDefinition& model, int64_t batch_size,
                              int optimizer_slots, int threads = 1);

// The estimate for `job`'s workers (training.batch_size, its optimizer).
MemoryEstimate EstimateJobMemory(const ModelDefinition& model,
                                 const JobConfig& job);

// "1.5 GiB", "230 MiB", "12 KiB".
std::string FormatBytes(int64_t bytes);

// One line: "each worker needs about 1.2 GiB (parameters 10 MiB,
// activations for a batch of 64: 930 MiB, the process 256 MiB, the
// training data 67 MiB); the servers hold 6 MiB".
std::string DescribeMemoryEstimate(const MemoryEstimate& estimate);

// OK when `workers` workers of `estimate` fit: each within the job's
// training.worker_memory_mib when it declares one, and all of them within
// `available` bytes (`available_source` names where that figure comes
// from). ResourceExhausted otherwise, naming the figures, the largest
// layers and the fixes.
absl::Status CheckJobMemory(const MemoryEstimate& estimate,
                            const JobConfig& job, int workers,
                            int64_t available,
                            const std::string& available_source);

}  // namespace psflow

#endif  // PSFLOW_MODEL_MEMORY_ESTIMATE_H_
