#include "data/criteo.h"

#include <zlib.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/criteo_parser.h"
#include "data/gzip_file.h"

namespace psflow {
namespace {

// Decompressed bytes handed to the parser at a time.
constexpr int kReadBytes = 1 << 20;
// After a bad line in a gzip file, how much more is read to see whether
// the compressed data is corrupt (then that is the error to report).
constexpr int64_t kCorruptionProbeBytes = int64_t{16} << 20;

constexpr GzFileAdvice kCriteoAdvice = {
    "Criteo data file",
    "check the path (psctl data synth-ctr generates such files)",
    "copy or generate it again"};

}  // namespace

absl::Status CheckCriteoFormat(const CriteoFormat& format) {
  if (format.num_dense < 0 || format.num_dense > kMaxCriteoDense) {
    return absl::InvalidArgumentError(
        absl::StrCat("CriteoFormat.num_dense is ", format.num_dense,
                     "; use 0..", kMaxCriteoDense, " (Criteo: 13)"));
  }
  if (format.num_fields < 0 || format.num_fields > kMaxCriteoFields) {
    return absl::InvalidArgumentError(
        absl::StrCat("CriteoFormat.num_fields is ", format.num_fields,
                     "; use 0..", kMaxCriteoFields, " (Criteo: 26)"));
  }
  if (format.num_dense + format.num_fields == 0) {
    return absl::InvalidArgumentError(
        "CriteoFormat has no feature columns (num_dense and num_fields are "
        "0); give at least one");
  }
  if (format.max_line_bytes < 1 || format.max_line_bytes > (1 << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CriteoFormat.max_line_bytes is ", format.max_line_bytes,
                     "; use 1..", 1 << 30, " (default 65536)"));
  }
  if (format.max_examples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CriteoFormat.max_examples is ", format.max_examples,
                     "; it must be at least 1"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CtrExamples> ParseCriteoText(absl::string_view text,
                                            const CriteoFormat& format,
                                            absl::string_view name) {
  RETURN_IF_ERROR(CheckCriteoFormat(format));
  CriteoTextParser parser(format, std::string(name));
  RETURN_IF_ERROR(parser.Feed(text));
  return std::move(parser).Finish();
}

namespace {

absl::StatusOr<CtrExamples> ReadCriteoFile(const std::string& path,
                                           const CriteoFormat& format,
                                           bool keep_examples) {
  RETURN_IF_ERROR(CheckCriteoFormat(format));
  ASSIGN_OR_RETURN(DataFileReader f,
                   DataFileReader::Open(path, kCriteoAdvice, kReadBytes));
  CriteoTextParser parser(format, path, keep_examples);
  // Not zeroed: Read fills what it returns.
  const std::unique_ptr<char[]> buffer(new char[kReadBytes]);
  while (true) {
    ASSIGN_OR_RETURN(const size_t got, f.Read(buffer.get(), kReadBytes));
    if (got == 0) break;
    absl::Status parsed = parser.Feed(absl::string_view(buffer.get(), got));
    if (!parsed.ok()) {
      // Corrupt compressed data can decode to garbage lines before zlib
      // notices; then the corruption is the error worth reporting.
      for (int64_t probed = 0; f.compressed() && probed < kCorruptionProbeBytes;
           probed += kReadBytes) {
        absl::StatusOr<size_t> more = f.Read(buffer.get(), kReadBytes);
        if (!more.ok()) return more.status();
        if (*more == 0) break;
      }
      return parsed;
    }
  }
  return std::move(parser).Finish();
}

}  // namespace

absl::StatusOr<CtrExamples> LoadCriteoFile(const std::string& path,
                                           const CriteoFormat& format) {
  return ReadCriteoFile(path, format, /*keep_examples=*/true);
}

absl::StatusOr<CtrExamples> DescribeCriteoFile(const std::string& path,
                                               const CriteoFormat& format) {
  return ReadCriteoFile(path, format, /*keep_examples=*/false);
}

}  // namespace psflow
