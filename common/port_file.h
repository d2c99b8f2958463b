// A server's bound port in a file, for launchers that bind port 0 and
// poll for the port (common/subprocess.h, WaitForPortFile). Written
// atomically (a launcher never reads a partial number), never through a
// symbolic link, and removed when the server stops, so a later launch
// polling the same path never finds a dead server's port.
#ifndef PSFLOW_COMMON_PORT_FILE_H_
#define PSFLOW_COMMON_PORT_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace psflow {

class PortFile {
 public:
  // Writes `port` to `path`. FailedPrecondition naming the path when it
  // cannot (a missing directory, a symbolic link).
  static absl::StatusOr<PortFile> Write(const std::string& path, int port);

  // Removes the file, unless another process has since written its own
  // port there.
  ~PortFile();
  PortFile(PortFile&& other) noexcept;
  PortFile& operator=(PortFile&&) = delete;
  PortFile(const PortFile&) = delete;
  PortFile& operator=(const PortFile&) = delete;

 private:
  PortFile(std::string path, std::string content)
      : path_(std::move(path)), content_(std::move(content)) {}

  std::string path_;  // empty once moved from
  std::string content_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_PORT_FILE_H_
