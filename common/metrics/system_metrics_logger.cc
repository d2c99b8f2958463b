#include "common/metrics/system_metrics_logger.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

int64_t NetworkBytes(const ProcessSample& s, bool received) {
  int64_t total = 0;
  for (const auto& [name, bytes] : s.network) {
    total += received ? bytes.first : bytes.second;
  }
  return total;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SystemMetricsLogger>> SystemMetricsLogger::Start(
    const std::string& task_dir, Options options) {
  ASSIGN_OR_RETURN(std::unique_ptr<EventFileWriter> writer,
                   EventFileWriter::Create(task_dir + "/system"));
  // Constructed before the thread starts, so the writer is in place.
  const bool start_thread = options.start_thread;
  options.start_thread = false;
  auto logger = std::make_unique<SystemMetricsLogger>(writer.get(), options);
  logger->owned_writer_ = std::move(writer);
  if (start_thread) {
    SystemMetricsLogger* raw = logger.get();
    raw->thread_ = std::thread([raw] { raw->Loop(); });
  }
  return logger;
}

std::unique_ptr<SystemMetricsLogger> SystemMetricsLogger::StartOrWarn(
    const std::string& task_dir, Options options) {
  absl::StatusOr<std::unique_ptr<SystemMetricsLogger>> started =
      Start(task_dir, options);
  if (!started.ok()) {
    LOG(WARNING) << "no system metrics: " << started.status().message();
    return nullptr;
  }
  return *std::move(started);
}

SystemMetricsLogger::SystemMetricsLogger(EventFileWriter* writer,
                                         Options options)
    : writer_(writer), options_(options) {
  if (options_.start_thread) thread_ = std::thread([this] { Loop(); });
}

SystemMetricsLogger::~SystemMetricsLogger() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void SystemMetricsLogger::Loop() {
  bool warned = false;
  do {
    absl::Status written = SampleOnce();
    if (!written.ok() && !warned) {
      LOG(WARNING) << "system metrics not written: " << written.message();
      warned = true;
    }
  } while (!stop_.WaitForNotificationWithTimeout(options_.interval));
}

absl::Status SystemMetricsLogger::SampleOnce() {
  const absl::Time now = absl::Now();
  const ProcessSample sample = SampleProcess();
  const int64_t step = absl::ToInt64Seconds(now - start_);
  absl::Status written;
  auto add = [&](absl::string_view tag, double value) {
    written.Update(writer_->AddScalar(tag, step, value, now));
  };
  if (sample.resident_bytes) {
    add("system/resident_memory_bytes", *sample.resident_bytes);
  }
  if (sample.threads) add("system/threads", *sample.threads);
  {
    MutexLock lock(&mu_);
    if (previous_.has_value() && now > previous_time_) {
      const ProcessSample& p = *previous_;
      const double seconds = absl::ToDoubleSeconds(now - previous_time_);
      auto rate = [&](absl::string_view tag, auto now_value, auto before) {
        if (now_value && before && *now_value >= *before) {
          add(tag, (*now_value - *before) / seconds);
        }
      };
      rate("system/cpu_utilization", sample.cpu_seconds, p.cpu_seconds);
      rate("system/disk_read_bytes_per_sec", sample.disk_read_bytes,
           p.disk_read_bytes);
      rate("system/disk_written_bytes_per_sec", sample.disk_written_bytes,
           p.disk_written_bytes);
      rate("system/network_receive_bytes_per_sec",
           std::optional<int64_t>(NetworkBytes(sample, true)),
           std::optional<int64_t>(NetworkBytes(p, true)));
      rate("system/network_transmit_bytes_per_sec",
           std::optional<int64_t>(NetworkBytes(sample, false)),
           std::optional<int64_t>(NetworkBytes(p, false)));
    }
    previous_ = sample;
    previous_time_ = now;
  }
  if (options_.gpus != nullptr) {
    for (const GpuSample& gpu : options_.gpus->Sample()) {
      const std::string prefix = absl::StrCat("system/gpu", gpu.index, "/");
      if (gpu.utilization) add(prefix + "utilization", *gpu.utilization);
      if (gpu.memory_used_bytes) {
        add(prefix + "memory_used_bytes", *gpu.memory_used_bytes);
      }
      if (gpu.temperature_celsius) {
        add(prefix + "temperature_celsius", *gpu.temperature_celsius);
      }
      if (gpu.power_watts) add(prefix + "power_watts", *gpu.power_watts);
    }
  }
  written.Update(writer_->Flush());
  return written;
}

}  // namespace psflow
