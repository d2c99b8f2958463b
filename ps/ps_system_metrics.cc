#include "ps/ps_system_metrics.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace psflow {

PsSystemMetrics::PsSystemMetrics(const ParameterServerCore* core,
                                 int task_index, std::string logdir_flag)
    : core_(core),
      task_index_(task_index),
      logdir_flag_(std::move(logdir_flag)) {
  thread_ = std::thread([this] { Run(); });
}

PsSystemMetrics::~PsSystemMetrics() {
  stop_.Notify();
  thread_.join();
  logger_.reset();  // before the writer it writes to
}

void PsSystemMetrics::Run() {
  // Configure arrives once, early; a short poll keeps this free of hooks
  // into the RPC path.
  std::optional<ConfigureRequest> configuration;
  while (!(configuration = core_->configuration()).has_value()) {
    if (stop_.WaitForNotificationWithTimeout(absl::Milliseconds(200))) return;
  }
  std::string root = logdir_flag_;
  if (root.empty()) root = configuration->log_dir();
  if (root.empty()) {
    // A client other than the chief (a benchmark, a tool) configured the
    // server without a log directory: no event file rather than one in
    // whatever directory the server happens to run in.
    LOG(INFO) << "no event file for system metrics: the configuration "
                 "names no log_dir and --logdir is not set";
    return;
  }
  const std::string job =
      configuration->job_name().empty() ? "unnamed" : configuration->job_name();
  const std::string& group = configuration->run_group();
  const std::string dir = absl::StrCat(
      root, "/", group.empty() ? "" : group + "/", job, "/ps-", task_index_);
  logger_ =
      SystemMetricsLogger::StartOrWarn(dir, SystemMetricsLogger::Options());
  if (logger_ != nullptr) LOG(INFO) << "system metrics: " << dir << "/system";
}

}  // namespace psflow
