#include "common/port_file.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace psflow {

absl::StatusOr<PortFile> PortFile::Write(const std::string& path, int port) {
  std::string content = absl::StrCat(port, "\n");
  absl::Status written = WriteFileWithMode(path, content, 0644);
  if (!written.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write the port file (--port_file) ", path, ": ",
                     written.message()));
  }
  return PortFile(path, std::move(content));
}

PortFile::PortFile(PortFile&& other) noexcept
    : path_(std::exchange(other.path_, "")),
      content_(std::move(other.content_)) {}

PortFile::~PortFile() {
  if (path_.empty()) return;
  // Read back first: a server started since with the same --port_file
  // owns it now. (Small race with such a server left: launchers give each
  // task its own file.)
  absl::StatusOr<std::string> now = ReadFileToString(path_, 64);
  if (now.ok() && *now == content_) unlink(path_.c_str());
}

}  // namespace psflow
