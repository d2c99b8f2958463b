// A parameter server's event file: its system metrics (CPU, memory,
// threads, disk and network; common/metrics/system_metrics_logger.h) under
// <log_dir>/<job name>/ps-<index>/, like every other task's. The job's name
// and log directory come with the chief's Configure, so the file is opened
// once the server is configured; `--logdir` overrides the job's log_dir.
// A server configured without a log_dir (not by a chief) and without
// --logdir writes no event file.
#ifndef PSFLOW_PS_PS_SYSTEM_METRICS_H_
#define PSFLOW_PS_PS_SYSTEM_METRICS_H_

#include <memory>
#include <string>
#include <thread>

#include "common/metrics/event_file_writer.h"
#include "common/metrics/system_metrics_logger.h"
#include "common/mutex.h"
#include "ps/ps_core.h"

namespace psflow {

class PsSystemMetrics {
 public:
  // `core` must outlive this object.
  PsSystemMetrics(const ParameterServerCore* core, int task_index,
                  std::string logdir_flag);
  // Stops logging (promptly, also before the server was configured).
  ~PsSystemMetrics();
  PsSystemMetrics(const PsSystemMetrics&) = delete;
  PsSystemMetrics& operator=(const PsSystemMetrics&) = delete;

 private:
  void Run();

  const ParameterServerCore* const core_;
  const int task_index_;
  const std::string logdir_flag_;
  Notification stop_;
  std::unique_ptr<SystemMetricsLogger> logger_;
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_PS_SYSTEM_METRICS_H_
