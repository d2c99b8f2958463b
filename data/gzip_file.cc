#include "data/gzip_file.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace psflow {

absl::StatusOr<GzFile> OpenGzFile(const std::string& path,
                                  const GzFileAdvice& advice,
                                  unsigned buffer_bytes) {
  absl::StatusOr<int> fd = OpenRegularFile(path);
  if (!fd.ok()) {
    const std::string message = absl::StrCat("cannot open ", advice.kind, " ",
                                             path, ": ", fd.status().message());
    if (absl::IsNotFound(fd.status())) {
      return absl::NotFoundError(
          absl::StrCat(message, "; ", advice.missing_hint));
    }
    return absl::FailedPreconditionError(message);
  }
  GzFile f(gzdopen(*fd, "rb"));
  if (f == nullptr) {
    close(*fd);
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot open ", advice.kind, " ", path, ": out of memory"));
  }
  gzbuffer(f.get(), buffer_bytes);
  return f;
}

absl::Status GzFileError(const std::string& path, gzFile f,
                         const GzFileAdvice& advice) {
  int code = Z_OK;
  const char* message = gzerror(f, &code);
  if (code == Z_OK) return absl::OkStatus();
  if (code == Z_BUF_ERROR) {
    return absl::DataLossError(
        absl::StrCat(path,
                     ": the gzip data ends early (the file is truncated or "
                     "damaged); ",
                     advice.redo_hint));
  }
  return absl::DataLossError(
      absl::StrCat(path, ": cannot ", gzdirect(f) ? "read" : "decompress", " (",
                   message, "); the file is corrupt: ", advice.redo_hint));
}

}  // namespace psflow
