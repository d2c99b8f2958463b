// Physical limits that psflow's numbers are compared with, measured in the
// same run on the same machine.
#ifndef PSFLOW_BENCH_BASELINES_H_
#define PSFLOW_BENCH_BASELINES_H_

#include <cstddef>

#include "absl/status/statusor.h"

namespace psflow::bench {

// Streams `bytes_per_stream` over each of `streams` TCP connections on
// 127.0.0.1 at once (4 MiB writes, default socket buffers); returns the
// aggregate GB/s (1e9 bytes/s), best of `repeats`.
absl::StatusOr<double> LoopbackTcpGBps(size_t bytes_per_stream, int streams,
                                       int repeats);

// STREAM-style triad a[i] = b[i] + s * c[i] over arrays of `elements`
// floats on one thread; returns GB/s counting 12 bytes per element, best of
// `repeats`.
double TriadGBps(size_t elements, int repeats);

}  // namespace psflow::bench

#endif  // PSFLOW_BENCH_BASELINES_H_
