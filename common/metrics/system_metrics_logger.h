// Writes a process's system metrics every few seconds, under the
// `system/` tag prefix, into an event file of their own: `<task dir>/system/`
// beside the task's training event file, so each file has one step axis
// (tools that keep one step counter per run, W&B's history among them,
// never see a step go backwards). TensorBoard shows it as the run
// `<task>/system`; W&B's system charts, once synced.
//
//   system/cpu_utilization            CPU seconds per second (1 = one core)
//   system/resident_memory_bytes
//   system/threads
//   system/disk_read_bytes_per_sec, system/disk_written_bytes_per_sec
//   system/network_receive_bytes_per_sec,
//   system/network_transmit_bytes_per_sec   (all interfaces of the
//                                            process's network namespace)
//   system/gpu<i>/utilization         0..1 (GPU workers, NVML)
//   system/gpu<i>/memory_used_bytes, system/gpu<i>/temperature_celsius,
//   system/gpu<i>/power_watts
//
// The step of each scalar is the seconds since the logger started. Rates
// start with the second sample. A background thread samples until the
// logger is destroyed.
#ifndef PSFLOW_COMMON_METRICS_SYSTEM_METRICS_LOGGER_H_
#define PSFLOW_COMMON_METRICS_SYSTEM_METRICS_LOGGER_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/event_file_writer.h"
#include "common/metrics/gpu_monitor.h"
#include "common/metrics/process_metrics.h"
#include "common/mutex.h"

namespace psflow {

class SystemMetricsLogger {
 public:
  struct Options {
    absl::Duration interval = absl::Seconds(5);
    // Optional: the GPUs to report (must outlive the logger).
    const GpuMonitor* gpus = nullptr;
    // Start the sampling thread (tests sample by hand with SampleOnce).
    bool start_thread = true;
  };

  // Starts logging into `<task_dir>/system/` (an event file it owns).
  static absl::StatusOr<std::unique_ptr<SystemMetricsLogger>> Start(
      const std::string& task_dir, Options options);

  // Start(), or, when the folder cannot be written, null after a warning:
  // a task without system metrics goes on.
  static std::unique_ptr<SystemMetricsLogger> StartOrWarn(
      const std::string& task_dir, Options options);

  // Logs into `writer`, which must outlive the logger (tests).
  SystemMetricsLogger(EventFileWriter* writer, Options options);
  ~SystemMetricsLogger();
  SystemMetricsLogger(const SystemMetricsLogger&) = delete;
  SystemMetricsLogger& operator=(const SystemMetricsLogger&) = delete;

  // Samples and writes once (the thread calls it every interval).
  absl::Status SampleOnce();

 private:
  void Loop();

  std::unique_ptr<EventFileWriter> owned_writer_;  // Start()'s
  EventFileWriter* const writer_;
  const Options options_;
  const absl::Time start_ = absl::Now();
  Mutex mu_;
  std::optional<ProcessSample> previous_ ABSL_GUARDED_BY(mu_);
  absl::Time previous_time_ ABSL_GUARDED_BY(mu_);
  Notification stop_;
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_SYSTEM_METRICS_LOGGER_H_
