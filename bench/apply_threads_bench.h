// optimizer_bench's sections on the apply spread over the server's apply
// threads (ps/apply_pool.h): wall and CPU time per float, one thread
// against several, for the bare optimizer loop split by ranges and for the
// server's whole push path. Each prints a Markdown table for
// bench/RESULTS.md. Run from one thread (they time the whole process's
// CPU).
#ifndef PSFLOW_BENCH_APPLY_THREADS_BENCH_H_
#define PSFLOW_BENCH_APPLY_THREADS_BENCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace psflow::bench {

// For sgd, adam and ftrl, and each size in `sizes` (floats per apply): the
// apply on the calling thread alone (what the server did before it had
// apply threads, and still does below the inline threshold) against the
// apply split over `threads` threads with no threshold. Median wall time
// of at least `repeats` applies (and 50 ms) per float; CPU time per float
// summed over all of them.
void PrintApplyThreads(int threads, const std::vector<int64_t>& sizes,
                       int repeats);

// Adam pushes through ParameterServerCore (NaN/Inf check, chunk lock,
// apply), apply_threads 1 against `threads`: one 4 MiB chunk per push, and
// a batch of 64 chunks of 16,384 floats per push. Wall and CPU time per
// applied float, as PrintApplyThreads measures them.
absl::Status PrintServerApply(int threads, int repeats);

}  // namespace psflow::bench

#endif  // PSFLOW_BENCH_APPLY_THREADS_BENCH_H_
