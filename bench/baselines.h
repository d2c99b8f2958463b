// Physical limits that psflow's numbers are compared with, measured in the
// same run on the same machine.
#ifndef PSFLOW_BENCH_BASELINES_H_
#define PSFLOW_BENCH_BASELINES_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace psflow::bench {

// Streams `bytes_per_stream` over each of `streams` TCP connections on
// 127.0.0.1 at once (4 MiB writes, default socket buffers); returns the
// aggregate GB/s (1e9 bytes/s), best of `repeats`.
absl::StatusOr<double> LoopbackTcpGBps(size_t bytes_per_stream, int streams,
                                       int repeats);

// One such run and what it cost: wall time and this process's CPU time
// (both ends' threads, the kernel's copies included; getrusage).
struct LoopbackCost {
  double gbps = 0;
  double wall_seconds = 0;
  double cpu_seconds = 0;
};
absl::StatusOr<LoopbackCost> LoopbackTcpRun(size_t bytes_per_stream,
                                            int streams);

// STREAM-style triad a[i] = b[i] + s * c[i] over arrays of `elements`
// floats on one thread; returns GB/s counting 12 bytes per element, best of
// `repeats`.
double TriadGBps(size_t elements, int repeats);

// Writes `bytes` of non-zero data to a new file at `path` (replacing any)
// with 4 MiB write(2) calls, then fdatasync; returns GB/s for the whole of
// it, fdatasync included. The file stays for SequentialReadGBps.
absl::StatusOr<double> SequentialWriteGBps(const std::string& path,
                                           size_t bytes);

// Reads all of `path` front to back with 4 MiB read(2) calls; returns GB/s.
// Whether that is the disk or the page cache depends on the cache state,
// which DropFromPageCache and PageCacheResidentFraction control and report.
absl::StatusOr<double> SequentialReadGBps(const std::string& path);

// Asks the kernel to evict the file's clean pages from the page cache
// (posix_fadvise DONTNEED; dirty pages are written back first, so they go
// too). Benchmarks do this to every file they read cold, theirs and
// psflow's alike.
absl::Status DropFromPageCache(const std::string& path);

// The fraction of the file's pages in the page cache now (mincore), 0..1.
absl::StatusOr<double> PageCacheResidentFraction(const std::string& path);

// The machine's load averages over 1, 5 and 15 minutes as /proc/loadavg
// shows them ("0.42 0.80 1.10"), for the conditions of a run: other
// processes on a shared machine take cores from a benchmark.
std::string LoadAverages();

// CPU time (user + system) this process has used so far, all its threads.
double ProcessCpuSeconds();

}  // namespace psflow::bench

#endif  // PSFLOW_BENCH_BASELINES_H_
