// System metrics of the calling process, read from /proc whenever the
// registry is refreshed (a scrape), for every role:
//
//   process_cpu_seconds_total               user + system CPU time
//   process_resident_memory_bytes           resident set size
//   process_virtual_memory_bytes            virtual memory size
//   process_start_time_seconds              when it started (Unix time)
//   process_open_fds, process_max_fds       file descriptors (open, limit)
//       (the standard names Prometheus' client libraries export, so stock
//       dashboards and alerts work)
//   psflow_process_threads
//   psflow_process_disk_read_bytes_total,
//   psflow_process_disk_written_bytes_total
//                                           storage I/O (/proc/self/io)
//   psflow_process_network_receive_bytes_total{interface},
//   psflow_process_network_transmit_bytes_total{interface}
//       the process's network namespace (Linux counts network bytes per
//       namespace, not per process: a pod's, or the host's)
//
// CPU utilization is rate(process_cpu_seconds_total[1m]).
// A /proc file that cannot be read leaves its metrics as they were.
#ifndef PSFLOW_COMMON_METRICS_PROCESS_METRICS_H_
#define PSFLOW_COMMON_METRICS_PROCESS_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/metrics/metrics_registry.h"

namespace psflow {

// One reading of /proc for this process.
struct ProcessSample {
  std::optional<double> cpu_seconds;
  std::optional<int64_t> resident_bytes;
  std::optional<int64_t> virtual_bytes;
  // Seconds after the machine booted that the process started.
  std::optional<double> started_after_boot_seconds;
  // Unix time of the start (the boot time from /proc/stat added).
  std::optional<double> start_time_seconds;
  std::optional<int64_t> open_fds;
  std::optional<int64_t> max_fds;
  std::optional<int64_t> threads;
  std::optional<int64_t> disk_read_bytes;
  std::optional<int64_t> disk_written_bytes;
  // interface -> (received, transmitted) bytes
  std::map<std::string, std::pair<int64_t, int64_t>> network;
};

// Parsers of the /proc formats (exposed for tests). Each fills what it
// recognizes in `sample`; malformed input fills nothing.
void ParseProcStat(absl::string_view text, int64_t clock_ticks_per_second,
                   int64_t page_bytes, ProcessSample& sample);
void ParseProcIo(absl::string_view text, ProcessSample& sample);
void ParseProcNetDev(absl::string_view text, ProcessSample& sample);
// The boot time ("btime <unix seconds>") of /proc/stat.
std::optional<int64_t> ParseBootTime(absl::string_view proc_stat);

// Reads /proc/self/{stat,io,net/dev,fd}, /proc/stat and the fd limit.
ProcessSample SampleProcess();

// Reads only /proc/self/stat: this process's resident set size.
std::optional<int64_t> ResidentMemoryBytes();

// Registers the families and a refresher that samples this process; the
// refreshing stops when the handle is destroyed.
absl::StatusOr<std::unique_ptr<MetricsRegistry::RefresherHandle>>
ExportProcessMetrics(MetricsRegistry* registry);

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_PROCESS_METRICS_H_
