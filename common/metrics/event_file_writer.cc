#include "common/metrics/event_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "proto/tensorboard.pb.h"

namespace psflow {
namespace {

void AppendFixed32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void AppendFixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace

std::string EncodeTfRecord(absl::string_view data) {
  std::string record;
  AppendFixed64(record, data.size());
  AppendFixed32(record, MaskCrc32c(Crc32c(record)));
  record.append(data.data(), data.size());
  AppendFixed32(record, MaskCrc32c(Crc32c(data)));
  return record;
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(
    const std::string& dir) {
  absl::Status made = MakeDirectories(dir);
  if (!made.ok()) return made;
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const std::string path =
      absl::StrCat(dir, "/events.out.tfevents.",
                   absl::ToUnixSeconds(absl::Now()), ".", host, ".", getpid());
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create event file ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<EventFileWriter> writer(new EventFileWriter(path, fd));
  tensorflow::Event event;
  event.set_wall_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  event.set_file_version("brain.Event:2");
  absl::Status written = writer->WriteRecord(event.SerializeAsString());
  if (!written.ok()) return written;
  absl::Status flushed = writer->Flush();
  if (!flushed.ok()) return flushed;
  return writer;
}

EventFileWriter::~EventFileWriter() {
  MutexLock lock(&mu_);
  (void)FlushLocked();
  close(fd_);
}

int64_t EventFileWriter::dropped_records() const {
  MutexLock lock(&mu_);
  return dropped_;
}

absl::Status EventFileWriter::WriteRecord(const std::string& data) {
  const std::string record = EncodeTfRecord(data);
  MutexLock lock(&mu_);
  // Too much waits for a file that keeps failing: the oldest records go.
  size_t drop = 0;
  while (drop < pending_starts_.size() &&
         pending_.size() - pending_starts_[drop] + record.size() >
             kMaxPendingBytes) {
    ++drop;
  }
  if (drop > 0) {
    const size_t cut =
        drop < pending_starts_.size() ? pending_starts_[drop] : pending_.size();
    pending_.erase(0, cut);
    pending_starts_.erase(pending_starts_.begin(),
                          pending_starts_.begin() + drop);
    for (size_t& start : pending_starts_) start -= cut;
    dropped_ += static_cast<int64_t>(drop);
  }
  pending_starts_.push_back(pending_.size());
  pending_ += record;
  if (pending_.size() >= kAutoFlushBytes) return FlushLocked();
  return absl::OkStatus();
}

absl::Status EventFileWriter::FlushLocked() {
  size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t n =
        pwrite(fd_, pending_.data() + done, pending_.size() - done,
               written_ + static_cast<int64_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      // Whatever part of the records reached the file goes again: the
      // file ends in its last whole record.
      if (done > 0 && ftruncate(fd_, written_) != 0) {
        return absl::DataLossError(absl::StrCat(
            "writing ", path_, ": ", std::strerror(error),
            "; and cannot cut the partial record off: ", std::strerror(errno)));
      }
      return absl::DataLossError(absl::StrCat(
          "writing ", path_, ": ", std::strerror(error), " (",
          pending_starts_.size(), " records wait for the next flush)"));
    }
    done += static_cast<size_t>(n);
  }
  written_ += static_cast<int64_t>(pending_.size());
  pending_.clear();
  pending_starts_.clear();
  return absl::OkStatus();
}

absl::Status EventFileWriter::AddScalar(absl::string_view tag, int64_t step,
                                        double value, absl::Time wall_time) {
  tensorflow::Event event;
  event.set_wall_time(absl::ToDoubleSeconds(wall_time - absl::UnixEpoch()));
  event.set_step(step);
  tensorflow::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(static_cast<float>(value));
  return WriteRecord(event.SerializeAsString());
}

absl::Status EventFileWriter::Flush() {
  MutexLock lock(&mu_);
  return FlushLocked();
}

}  // namespace psflow
