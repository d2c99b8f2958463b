// Writes TensorBoard event files, so TensorBoard and `wandb sync` show a
// job's metrics. One writer per process, in its own directory
// <log_dir>/<run>/<role>-<index>/ so runs group by task; scalars use stable
// tags shared across roles ("loss" from the chief's training view and from
// the evaluator land in one chart).
//
// Format: TFRecord records (length, masked CRC-32C of the length, data,
// masked CRC-32C of the data), each holding a tensorflow.Event; the first
// is {file_version: "brain.Event:2"}. Thread-safe.
#ifndef PSFLOW_COMMON_METRICS_EVENT_FILE_WRITER_H_
#define PSFLOW_COMMON_METRICS_EVENT_FILE_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace psflow {

// One TFRecord record holding `data`.
std::string EncodeTfRecord(absl::string_view data);

class EventFileWriter {
 public:
  // Creates `dir` if needed and a new events.out.tfevents.<seconds>.<host>
  // file in it.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(
      const std::string& dir);
  ~EventFileWriter();

  absl::Status AddScalar(absl::string_view tag, int64_t step, double value,
                         absl::Time wall_time = absl::Now());

  // Pushes buffered records to the file (TensorBoard reads what is there).
  absl::Status Flush();

  const std::string& path() const { return path_; }

 private:
  EventFileWriter(std::string path, std::FILE* file)
      : path_(std::move(path)), file_(file) {}
  absl::Status WriteRecord(const std::string& data);

  const std::string path_;
  Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_EVENT_FILE_WRITER_H_
