// Writes TensorBoard event files, so TensorBoard and `wandb sync` show a
// job's metrics. One writer per process, in its own directory
// <log_dir>/<run>/<role>-<index>/ so runs group by task; scalars use stable
// tags shared across roles ("loss" from the chief's training view and from
// the evaluator land in one chart).
//
// Format: TFRecord records (length, masked CRC-32C of the length, data,
// masked CRC-32C of the data), each holding a tensorflow.Event; the first
// is {file_version: "brain.Event:2"}. Thread-safe.
//
// The file only ever ends in a whole record: records wait in memory until
// Flush (or until 64 KiB wait), which writes them at the end of the last
// whole one; a write that fails part way (a full disk) is cut back off, so
// a reader never meets a torn record, and the records are tried again at
// the next Flush (at most 4 MiB of them wait; older ones beyond that are
// dropped and counted).
#ifndef PSFLOW_COMMON_METRICS_EVENT_FILE_WRITER_H_
#define PSFLOW_COMMON_METRICS_EVENT_FILE_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

  // Writes the waiting records to the file (TensorBoard reads what is
  // there). DataLoss when they could not all be written; the file then
  // still ends in a whole record, and they are tried again next time.
  absl::Status Flush();

  const std::string& path() const { return path_; }

  // Records dropped because too many waited for a failing file.
  int64_t dropped_records() const;

  // Records wait for Flush up to this many bytes, then are written; at
  // most kMaxPendingBytes wait while writes fail.
  static constexpr size_t kAutoFlushBytes = 64 * 1024;
  static constexpr size_t kMaxPendingBytes = 4 * 1024 * 1024;

 private:
  EventFileWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status WriteRecord(const std::string& data);
  absl::Status FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable Mutex mu_;
  const int fd_;
  // Bytes of whole records in the file, and whole records not yet in it.
  int64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  std::string pending_ ABSL_GUARDED_BY(mu_);
  // Where each pending record starts in pending_ (to drop whole ones).
  std::vector<size_t> pending_starts_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_EVENT_FILE_WRITER_H_
