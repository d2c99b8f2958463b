// The CPU backend's compute threads: a small fork-join pool that splits an
// op's work into contiguous chunks, one per thread, the calling thread
// taking the first. Threads claim chunks rather than own them, so when a
// helper is descheduled (a busy machine) the others take its chunk instead
// of waiting for it. The helper threads start with the pool and live as
// long as it does (no thread is created per call); each sets flush-to-zero
// (common/float_mode.h) first thing, whatever the creating thread's mode.
//
// A training step is a few dozen ops in quick succession, some of them
// only tens of microseconds long, and waking a blocked thread costs about
// as much on a VM (50-70 us measured on the 2-core VM). So a helper that
// finishes a chunk, and a caller waiting for its helpers, spin for up to
// kSpin before blocking, as OpenMP runtimes and OpenBLAS do: the next op's
// work is picked up at once, and an idle pool (between steps, while the
// worker waits on the parameter servers) still sleeps.
//
// Chunk boundaries depend only on the work's size, the grain and the
// pool's thread count (not on which thread runs a chunk), so an op that
// combines per-chunk partial results in chunk order gives bitwise the same
// result on every run with the same thread count.
//
// Thread safety: ParallelFor may be called from any thread. One call at a
// time uses the helpers; a call made while another is running (from
// another thread, or from inside a chunk) runs its chunks one after the
// other on the calling thread, in chunk order, so it gives the same result.
#ifndef PSFLOW_MODEL_DEVICE_CPU_CPU_THREAD_POOL_H_
#define PSFLOW_MODEL_DEVICE_CPU_CPU_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "common/mutex.h"

namespace psflow::cpu {

class CpuThreadPool {
 public:
  // `threads` >= 1 compute threads in all: the caller and threads - 1
  // helpers.
  explicit CpuThreadPool(int threads);
  // Stops and joins the helpers; no ParallelFor may be running.
  ~CpuThreadPool();

  CpuThreadPool(const CpuThreadPool&) = delete;
  CpuThreadPool& operator=(const CpuThreadPool&) = delete;

  int threads() const { return threads_; }

  // How many chunks ParallelFor splits n items into: one per thread, but
  // none smaller than `grain` items (1 when n < 2 * grain).
  int Chunks(int64_t n, int64_t grain) const;

  // Calls fn(chunk, begin, end) for each of the Chunks(n, grain) chunks of
  // [0, n) (chunk i is [n * i / chunks, n * (i + 1) / chunks)), in
  // parallel, and returns when every call has returned. Chunks must not
  // write to the same memory.
  void ParallelFor(int64_t n, int64_t grain,
                   absl::FunctionRef<void(int, int64_t, int64_t)> fn);

 private:
  // What the helpers run: the job of generation `generation_`.
  struct Job {
    absl::FunctionRef<void(int, int64_t, int64_t)>* fn = nullptr;
    int64_t n = 0;
    int chunks = 0;
    uint32_t tag = 0;  // the generation's low 32 bits
  };

  void HelperLoop();
  static void RunChunk(const Job& job, int chunk);
  // Claims and runs `job`'s chunks until none is left; returns how many.
  int RunClaimedChunks(const Job& job);

  // Constant after construction.
  const int threads_;
  std::vector<std::thread> helpers_;

  // Set by the one ParallelFor that uses the helpers.
  std::atomic<bool> busy_{false};

  Mutex mu_;
  Job job_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Written with mu_ held (so that Await sees them change), read without
  // it while spinning.
  std::atomic<int64_t> generation_{0};
  std::atomic<int> done_{0};  // chunks of this job that have run
  // The job's tag << 32 | the next chunk to claim; claims by a thread that
  // holds an older job fail on the tag.
  std::atomic<uint64_t> claim_{0};
};

}  // namespace psflow::cpu

#endif  // PSFLOW_MODEL_DEVICE_CPU_CPU_THREAD_POOL_H_
