#include "common/port_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace psflow {

absl::Status WritePortFile(const std::string& path, int port) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot write port file ", tmp, ": ", std::strerror(errno)));
  }
  const bool written = std::fprintf(f, "%d\n", port) > 0;
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot write port file ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace psflow
