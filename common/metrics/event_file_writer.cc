#include "common/metrics/event_file_writer.h"

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
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create event file ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<EventFileWriter> writer(new EventFileWriter(path, file));
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
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status EventFileWriter::WriteRecord(const std::string& data) {
  const std::string record = EncodeTfRecord(data);
  MutexLock lock(&mu_);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    return absl::DataLossError(
        absl::StrCat("writing ", path_, ": ", std::strerror(errno)));
  }
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
  if (std::fflush(file_) != 0) {
    return absl::DataLossError(
        absl::StrCat("flushing ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace psflow
