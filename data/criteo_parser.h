// The line parser behind data/criteo.h: takes Criteo text in pieces of any
// size (a file read in chunks, decompressed or not) and builds CtrExamples,
// so memory holds the examples, never the whole text, and a line is never
// longer than CriteoFormat::max_line_bytes in memory.
//
// Thread-compatible; one parser reads one text.
#ifndef PSFLOW_DATA_CRITEO_PARSER_H_
#define PSFLOW_DATA_CRITEO_PARSER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/criteo.h"

namespace psflow {

class CriteoTextParser {
 public:
  // `format` must pass CheckCriteoFormat. `name` (a path) starts every
  // error message. Without `keep_examples` every line is checked and
  // counted, then dropped: Finish returns the count (num_examples) and the
  // column counts, with no example data, in memory that does not grow.
  CriteoTextParser(const CriteoFormat& format, std::string name,
                   bool keep_examples = true);
  CriteoTextParser(const CriteoTextParser&) = delete;
  CriteoTextParser& operator=(const CriteoTextParser&) = delete;

  // Parses every line that `bytes`, the next piece of the text, completes
  // and keeps an unfinished last line for the next call. An error is
  // final: call neither Feed nor Finish again.
  absl::Status Feed(absl::string_view bytes);

  // The end of the text: parses the unfinished line, if any, and returns
  // the examples; InvalidArgument when there were none.
  absl::StatusOr<CtrExamples> Finish() &&;

  // Lines completed so far.
  int64_t lines() const { return line_number_; }

 private:
  absl::Status ParseLine(absl::string_view line);
  // "<name>:<line>: <problem>" for the line being parsed.
  absl::Status LineError(absl::string_view problem) const;
  // The error for a bad value in column `column` (0 is the label) of
  // `line`, or WrongColumnCount when the line has the wrong number of
  // columns, the likelier cause.
  absl::Status ColumnError(absl::string_view line, int column,
                           absl::string_view problem) const;
  absl::Status WrongColumnCount(absl::string_view line) const;
  absl::Status OverlongLine();
  std::string ColumnName(int column) const;

  const CriteoFormat format_;
  const std::string name_;
  const bool keep_examples_;
  int64_t line_number_ = 0;  // of the line being parsed, 1-based
  std::string pending_;      // an unfinished line, never empty when kept
  CtrExamples examples_;
};

}  // namespace psflow

#endif  // PSFLOW_DATA_CRITEO_PARSER_H_
