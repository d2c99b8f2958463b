#include "model/device/cpu/cpu_thread_pool.h"

#include <algorithm>
#include <chrono>

#include "common/float_mode.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace psflow::cpu {
namespace {

// How long a helper looks for the next job, and a caller for its helpers,
// before blocking (see the header).
constexpr std::chrono::microseconds kSpin(200);

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or kSpin has passed; returns done().
template <typename Predicate>
bool SpinUntil(Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  while (!done()) {
    for (int i = 0; i < 64; ++i) CpuRelax();
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
  return true;
}

}  // namespace

CpuThreadPool::CpuThreadPool(int threads) : threads_(std::max(1, threads)) {
  helpers_.reserve(threads_ - 1);
  for (int i = 1; i < threads_; ++i) {
    helpers_.emplace_back([this] { HelperLoop(); });
  }
}

CpuThreadPool::~CpuThreadPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& helper : helpers_) helper.join();
}

int CpuThreadPool::Chunks(int64_t n, int64_t grain) const {
  const int64_t most = n / std::max<int64_t>(grain, 1);
  return static_cast<int>(std::clamp<int64_t>(most, 1, threads_));
}

void CpuThreadPool::RunChunk(const Job& job, int chunk) {
  const int64_t begin = job.n * chunk / job.chunks;
  const int64_t end = job.n * (chunk + 1) / job.chunks;
  (*job.fn)(chunk, begin, end);
}

void CpuThreadPool::ParallelFor(
    int64_t n, int64_t grain,
    absl::FunctionRef<void(int, int64_t, int64_t)> fn) {
  if (n <= 0) return;
  Job job;
  job.fn = &fn;
  job.n = n;
  job.chunks = Chunks(n, grain);
  bool expected = false;
  if (job.chunks == 1 || !busy_.compare_exchange_strong(
                             expected, true, std::memory_order_acquire)) {
    // Too little work, or the helpers are taken (another caller, or a
    // nested call): the same chunks, here, in order.
    for (int chunk = 0; chunk < job.chunks; ++chunk) RunChunk(job, chunk);
    return;
  }
  {
    MutexLock lock(&mu_);
    job.tag =
        static_cast<uint32_t>(generation_.load(std::memory_order_relaxed) + 1);
    job_ = job;
    done_.store(0, std::memory_order_relaxed);
    claim_.store(uint64_t{job.tag} << 32 | 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  RunChunk(job, 0);
  // Then whatever chunks no helper has claimed yet (one may be descheduled
  // on a busy machine).
  done_.fetch_add(1 + RunClaimedChunks(job), std::memory_order_relaxed);
  // Acquire: the helpers' writes happen before their increments.
  auto done = [this, chunks = job.chunks] {
    return done_.load(std::memory_order_acquire) == chunks;
  };
  if (!SpinUntil(done)) {
    MutexLock lock(&mu_);
    mu_.Await(Condition(&done));
  }
  busy_.store(false, std::memory_order_release);
}

int CpuThreadPool::RunClaimedChunks(const Job& job) {
  int ran = 0;
  uint64_t claim = claim_.load(std::memory_order_relaxed);
  while ((claim >> 32) == job.tag &&
         static_cast<int>(claim & 0xffffffff) < job.chunks) {
    if (claim_.compare_exchange_weak(claim, claim + 1,
                                     std::memory_order_relaxed)) {
      RunChunk(job, static_cast<int>(claim & 0xffffffff));
      ++ran;
      claim = claim_.load(std::memory_order_relaxed);
    }
  }
  return ran;
}

void CpuThreadPool::HelperLoop() {
  // Set here rather than inherited: the pool may be created by a thread
  // that never set the mode (a test, a library user's thread).
  EnableFlushToZero();
  int64_t seen = 0;
  while (true) {
    auto new_job = [this, &seen] {
      return generation_.load(std::memory_order_acquire) != seen;
    };
    Job job;
    SpinUntil(new_job);
    {
      MutexLock lock(&mu_);
      auto woken = [this, &new_job]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || new_job();
      };
      mu_.Await(Condition(&woken));
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      job = job_;
    }
    const int ran = RunClaimedChunks(job);
    if (ran == 0) continue;
    MutexLock lock(&mu_);  // so that a caller blocked in Await sees it
    done_.fetch_add(ran, std::memory_order_release);
  }
}

}  // namespace psflow::cpu
