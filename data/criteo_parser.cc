#include "data/criteo_parser.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

// Longest piece of a bad value quoted in an error message.
constexpr size_t kQuoteBytes = 24;

// `value` quoted and escaped for an error message, cut after kQuoteBytes.
std::string Quote(absl::string_view value) {
  const bool cut = value.size() > kQuoteBytes;
  return absl::StrCat("\"", absl::CHexEscape(value.substr(0, kQuoteBytes)),
                      cut ? "...\"" : "\"");
}

enum class Parsed { kOk, kBad, kTooLarge };

// The value of decimal digit `c`; above 9 when it is not one.
inline unsigned DecimalDigit(char c) {
  return static_cast<unsigned>(static_cast<unsigned char>(c)) - '0';
}

// A decimal int64 with an optional '-'; `text` is not empty.
Parsed ParseDecimal(absl::string_view text, int64_t& out) {
  const bool negative = text[0] == '-';
  const size_t first = negative ? 1 : 0;
  if (first == text.size()) return Parsed::kBad;
  // |INT64_MIN| = INT64_MAX + 1.
  const uint64_t limit = uint64_t{INT64_MAX} + (negative ? 1 : 0);
  uint64_t value = 0;
  for (size_t i = first; i < text.size(); ++i) {
    const unsigned digit = DecimalDigit(text[i]);
    if (digit > 9) return Parsed::kBad;
    if (value > (limit - digit) / 10) {
      // Tell a long number from one with a bad character further on.
      for (size_t j = i + 1; j < text.size(); ++j) {
        if (DecimalDigit(text[j]) > 9) return Parsed::kBad;
      }
      return Parsed::kTooLarge;
    }
    value = value * 10 + digit;
  }
  out =
      negative ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
  return Parsed::kOk;
}

// The value of hex digit `c`, or 16 when it is not one.
inline unsigned HexDigit(unsigned char c) {
  if (c - '0' < 10u) return c - '0';
  const unsigned lower = c | 0x20;  // 'A'..'F' -> 'a'..'f'
  if (lower - 'a' < 6u) return lower - 'a' + 10;
  return 16;
}

// 1 to 16 hex digits; `text` is not empty.
Parsed ParseHex(absl::string_view text, uint64_t& out) {
  uint64_t value = 0;
  for (char c : text) {
    const unsigned digit = HexDigit(static_cast<unsigned char>(c));
    if (digit == 16) return Parsed::kBad;
    value = (value << 4) | digit;
  }
  if (text.size() > 16) return Parsed::kTooLarge;
  out = value;
  return Parsed::kOk;
}

int64_t ColumnCount(absl::string_view line) {
  return 1 + std::count(line.begin(), line.end(), '\t');
}

}  // namespace

CriteoTextParser::CriteoTextParser(const CriteoFormat& format, std::string name,
                                   bool keep_examples)
    : format_(format), name_(std::move(name)), keep_examples_(keep_examples) {
  examples_.num_dense = format.num_dense;
  examples_.num_fields = format.num_fields;
  examples_.offsets.push_back(0);
}

absl::Status CriteoTextParser::Feed(absl::string_view bytes) {
  const size_t max_line = static_cast<size_t>(format_.max_line_bytes);
  if (!pending_.empty()) {
    const size_t newline = bytes.find('\n');
    const size_t take =
        newline == absl::string_view::npos ? bytes.size() : newline;
    if (pending_.size() + take > max_line) return OverlongLine();
    pending_.append(bytes.data(), take);
    if (newline == absl::string_view::npos) return absl::OkStatus();
    RETURN_IF_ERROR(ParseLine(pending_));
    pending_.clear();
    bytes.remove_prefix(newline + 1);
  }
  while (!bytes.empty()) {
    const void* newline = std::memchr(bytes.data(), '\n', bytes.size());
    if (newline == nullptr) {
      if (bytes.size() > max_line) return OverlongLine();
      pending_.assign(bytes.data(), bytes.size());
      return absl::OkStatus();
    }
    const size_t length = static_cast<const char*>(newline) - bytes.data();
    if (length > max_line) return OverlongLine();
    RETURN_IF_ERROR(ParseLine(bytes.substr(0, length)));
    bytes.remove_prefix(length + 1);
  }
  return absl::OkStatus();
}

absl::StatusOr<CtrExamples> CriteoTextParser::Finish() && {
  if (!pending_.empty()) {
    RETURN_IF_ERROR(ParseLine(pending_));
    pending_.clear();
  }
  if (examples_.num_examples == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name_,
        ": holds no examples (the file is empty); give a Criteo text "
        "file with one example per line"));
  }
  return std::move(examples_);
}

absl::Status CriteoTextParser::ParseLine(absl::string_view line) {
  ++line_number_;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) {
    return LineError(
        "empty line; a blank line inside the data is a sign of a damaged or "
        "badly joined file: find out why it is there and remove it");
  }
  if (examples_.num_examples >= format_.max_examples) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, ":", line_number_, ": more than ", format_.max_examples,
        " examples (CriteoFormat.max_examples); split the file or raise the "
        "limit"));
  }
  const char* p = line.data();
  const char* const end = p + line.size();
  // The next column, up to a tab or the end; false when the line ended.
  auto next = [&](absl::string_view& column) {
    if (p > end) return false;
    const char* start = p;
    while (p < end && *p != '\t') ++p;
    column = absl::string_view(start, p - start);
    ++p;  // past the tab (or one past the end: no more columns)
    return true;
  };

  absl::string_view column;
  next(column);
  if (column != "0" && column != "1") {
    return ColumnError(
        line, 0,
        absl::StrCat(
            Quote(column), " is not 0 or 1",
            line_number_ == 1
                ? "; Criteo text has no header line: remove it if this is one"
                : "; every line starts with the label, 0 or 1"));
  }
  const uint8_t label = column[0] == '1';

  float dense[kMaxCriteoDense];
  for (int d = 0; d < format_.num_dense; ++d) {
    if (!next(column)) return WrongColumnCount(line);
    int64_t value = 0;
    if (!column.empty()) {
      switch (ParseDecimal(column, value)) {
        case Parsed::kOk:
          break;
        case Parsed::kBad:
          return ColumnError(
              line, 1 + d,
              absl::StrCat(Quote(column),
                           " is not an integer; integer columns hold "
                           "decimal digits with an optional '-', or "
                           "nothing when the value is missing"));
        case Parsed::kTooLarge:
          return ColumnError(
              line, 1 + d,
              absl::StrCat(Quote(column),
                           " does not fit in 64 bits; is the column "
                           "order right?"));
      }
    }
    dense[d] = CtrDenseFeature(value);
  }
  // On an error the line is left half-appended: errors are final.
  for (int f = 0; f < format_.num_fields; ++f) {
    if (!next(column)) return WrongColumnCount(line);
    if (!column.empty()) {
      uint64_t value = 0;
      switch (ParseHex(column, value)) {
        case Parsed::kOk:
          break;
        case Parsed::kBad:
          return ColumnError(
              line, 1 + format_.num_dense + f,
              absl::StrCat(Quote(column),
                           " is not hexadecimal; categorical columns hold 1 "
                           "to 16 hex digits, or nothing when the value is "
                           "missing"));
        case Parsed::kTooLarge:
          return ColumnError(
              line, 1 + format_.num_dense + f,
              absl::StrCat(Quote(column), " has ", column.size(),
                           " hex digits; at most 16 (64 bits) fit"));
      }
      examples_.ids.push_back(CtrFeatureId(f, value));
    }
    examples_.offsets.push_back(static_cast<int64_t>(examples_.ids.size()));
  }
  if (p <= end) return WrongColumnCount(line);
  examples_.labels.push_back(label);
  examples_.dense.insert(examples_.dense.end(), dense,
                         dense + format_.num_dense);
  ++examples_.num_examples;
  if (!keep_examples_) {
    // Counted and checked; the buffers keep their capacity for the next.
    examples_.ids.clear();
    examples_.offsets.resize(1);
    examples_.labels.clear();
    examples_.dense.clear();
  }
  return absl::OkStatus();
}

absl::Status CriteoTextParser::LineError(absl::string_view problem) const {
  return absl::InvalidArgumentError(
      absl::StrCat(name_, ":", line_number_, ": ", problem));
}

absl::Status CriteoTextParser::ColumnError(absl::string_view line, int column,
                                           absl::string_view problem) const {
  // A line with a column missing in the middle fails at a value first.
  if (ColumnCount(line) != 1 + format_.num_dense + format_.num_fields) {
    return WrongColumnCount(line);
  }
  return LineError(absl::StrCat("column ", column + 1, " (", ColumnName(column),
                                "): ", problem));
}

absl::Status CriteoTextParser::WrongColumnCount(absl::string_view line) const {
  const int64_t columns = ColumnCount(line);
  return LineError(absl::StrCat(
      columns, " tab-separated column", columns == 1 ? "" : "s", ", expected ",
      1 + format_.num_dense + format_.num_fields, " (the label, ",
      format_.num_dense, " integer and ", format_.num_fields,
      " categorical); the line is damaged, or the file has other column "
      "counts than the reader was given (CriteoFormat num_dense, "
      "num_fields)"));
}

absl::Status CriteoTextParser::OverlongLine() {
  ++line_number_;
  return LineError(absl::StrCat(
      "longer than ", format_.max_line_bytes,
      " bytes; a Criteo line is under 1 KiB, and the limit leaves 64 bytes "
      "for each of the format's columns (data.num_dense, data.num_fields): "
      "is this a Criteo text file with those columns?"));
}

std::string CriteoTextParser::ColumnName(int column) const {
  if (column == 0) return "label";
  if (column <= format_.num_dense) return absl::StrCat("I", column);
  return absl::StrCat("C", column - format_.num_dense);
}

}  // namespace psflow
