// Reads click-through-rate data in the Criteo display-advertising text
// format (docs/data.md), plain or gzipped, into CtrExamples:
//
//   <label> \t <I1> ... \t <I13> \t <C1> ... \t <C26> \n
//
// one example per line: the label 0 or 1; integer features in decimal,
// possibly negative; categorical features as 1 to 16 hex digits (Criteo
// writes 8 lowercase ones). An empty integer or categorical field is a
// missing value: dense 0, an empty bag. Categorical value v of field f
// (0-based) becomes the id CtrFeatureId(f, v) (data/ctr_examples.h).
//
// Every line is checked; a bad one is InvalidArgument "<name>:<line>:
// <problem>; <fix>". Memory grows with the data read (about 480 bytes per
// Criteo example, about twice the text), never with a claim in the file.
// The functions are pure and thread-safe.
#ifndef PSFLOW_DATA_CRITEO_H_
#define PSFLOW_DATA_CRITEO_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/ctr_examples.h"
#include "proto/job_config.pb.h"

namespace psflow {

struct CriteoFormat {
  // Integer columns after the label, then categorical columns (Criteo: 13
  // and 26; generated data may have others). num_dense + num_fields >= 1.
  int num_dense = 13;
  int num_fields = 26;
  // A longer line is an error, not an allocation: a Criteo line is under
  // 1 KiB, so a longer one means a file of another kind.
  int64_t max_line_bytes = int64_t{64} << 10;
  // More examples are ResourceExhausted (memory grows ~480 bytes per
  // Criteo example); the default takes any file that fits in memory.
  int64_t max_examples = std::numeric_limits<int64_t>::max();
};

// The line limit for `format`'s columns: 64 KiB, or room for 64 bytes a
// column when it has that many (a valid line of 4096 + 4096 columns runs
// to about 155 KB; every column is a number or a hex id and a tab).
inline int64_t CriteoLineLimit(const CriteoFormat& format) {
  const int64_t columns =
      int64_t{format.num_dense < 0 ? 0 : format.num_dense} +
      int64_t{format.num_fields < 0 ? 0 : format.num_fields};
  return std::max<int64_t>(int64_t{64} << 10, 64 * (columns + 1));
}

// A format by its counts, 0 meaning Criteo's 13 and 26 (tools, tests).
inline CriteoFormat CriteoFormatOf(int num_dense, int num_fields) {
  CriteoFormat format;
  if (num_dense != 0) format.num_dense = num_dense;
  if (num_fields != 0) format.num_fields = num_fields;
  format.max_line_bytes = CriteoLineLimit(format);
  return format;
}

// The format a job config names: data.num_dense as set (0: no integer
// columns), Criteo's 13 when unset; data.num_fields, 0 or unset meaning
// Criteo's 26.
inline CriteoFormat CriteoFormatOf(const DataConfig& data) {
  CriteoFormat format = CriteoFormatOf(0, data.num_fields());
  if (data.has_num_dense()) format.num_dense = data.num_dense();
  format.max_line_bytes = CriteoLineLimit(format);
  return format;
}

// The limits CriteoFormat's counts must respect.
inline constexpr int kMaxCriteoDense = 1 << 12;
inline constexpr int kMaxCriteoFields = 1 << 12;  // < kMaxCtrFields

// InvalidArgument naming the bad member of `format` and its bounds.
absl::Status CheckCriteoFormat(const CriteoFormat& format);

// Parses Criteo text already in memory; `name` stands for the file in
// error messages. A single newline at the end is fine; an empty line
// anywhere else is an error (a sign of a broken or badly joined file), and
// so is text without examples. A "\r\n" line end is read like "\n".
absl::StatusOr<CtrExamples> ParseCriteoText(absl::string_view text,
                                            const CriteoFormat& format,
                                            absl::string_view name);

// Reads `path`, plain or gzip-compressed (recognized by its magic bytes,
// not its name), streaming: memory holds the examples, not the text.
// NotFound when the file is missing; FailedPrecondition when it is not a
// regular file; DataLoss when the gzip data is corrupt or truncated;
// InvalidArgument for a bad line (as ParseCriteoText) or a bad `format`.
absl::StatusOr<CtrExamples> LoadCriteoFile(
    const std::string& path, const CriteoFormat& format = CriteoFormat());

// As LoadCriteoFile, every line checked, but only counted: the result has
// num_examples, num_dense and num_fields and no example data, and memory
// stays that of one line whatever the file's size (the chief learns a
// job's size so, without holding its training set).
absl::StatusOr<CtrExamples> DescribeCriteoFile(
    const std::string& path, const CriteoFormat& format = CriteoFormat());

}  // namespace psflow

#endif  // PSFLOW_DATA_CRITEO_H_
