#ifndef PSFLOW_DATA_GZIP_FILE_H_
#define PSFLOW_DATA_GZIP_FILE_H_

// Reading data files that may be gzip-compressed (zlib's gzread reads raw
// files transparently), with the errors the data readers share.

#include <zlib.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// What a data file's errors tell its user: `kind` names the file in
// messages ("data file", "Criteo data file"); `missing_hint` follows a
// missing file's error; `redo_hint` follows a truncated or corrupt one's
// (how to get the file again, e.g. "reinstall it (dataset-fashion-mnist)").
struct GzFileAdvice {
  absl::string_view kind;
  absl::string_view missing_hint;
  absl::string_view redo_hint;
};

// Opens `path`, a regular file only (a FIFO or device could block or never
// end), for gzread with a `buffer_bytes` buffer. NotFound (with
// `advice.missing_hint`), FailedPrecondition, or ResourceExhausted.
absl::StatusOr<GzFile> OpenGzFile(const std::string& path,
                                  const GzFileAdvice& advice,
                                  unsigned buffer_bytes);

// DataLoss naming `path` when zlib recorded an error on `f`, else OK. A
// gzip stream cut short ends like a whole one, its CRC trailer unchecked:
// call this at the end of the data too, not only when gzread fails.
absl::Status GzFileError(const std::string& path, gzFile f,
                         const GzFileAdvice& advice);

}  // namespace psflow

#endif  // PSFLOW_DATA_GZIP_FILE_H_
