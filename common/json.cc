#include "common/json.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

// Deep nesting only comes from hostile input; bound the recursion.
constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    SkipWhitespace();
    if (AtEnd()) return Error("the document is empty");
    ASSIGN_OR_RETURN(JsonValue value, ParseValue(0));
    SkipWhitespace();
    if (!AtEnd()) {
      return Error(absl::StrCat("unexpected ", Here(),
                                " after the end of the JSON value"));
    }
    return value;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }

  // The character at the cursor, as it reads in an error message.
  std::string Here() const {
    if (AtEnd()) return "end of input";
    char c = Peek();
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return absl::StrFormat("control character 0x%02x",
                             static_cast<unsigned char>(c));
    }
    if (absl::StartsWith(text_.substr(pos_), "\xEF\xBB\xBF")) {
      return "a UTF-8 byte-order mark (save the file as UTF-8 without one)";
    }
    if (static_cast<unsigned char>(c) >= 0x80) {
      // Half a character would print as mojibake: the byte, and what it is.
      return absl::StrFormat("the non-ASCII byte 0x%02x (JSON syntax is ASCII)",
                             static_cast<unsigned char>(c));
    }
    return absl::StrCat("'", std::string(1, c), "'");
  }

  absl::Status Error(absl::string_view problem) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line, ", column ", column, ": ", problem));
  }

  void SkipWhitespace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' ||
                        Peek() == '\r')) {
      ++pos_;
    }
  }

  absl::StatusOr<JsonValue> ParseValue(int depth) {
    if (depth > kMaxDepth) {
      return Error(absl::StrCat("nesting deeper than ", kMaxDepth, " levels"));
    }
    if (AtEnd()) return Error("expected a value, got end of input");
    switch (Peek()) {
      case '{':
        return ParseObject(depth);
      case '[':
        return ParseArray(depth);
      case '"': {
        ASSIGN_OR_RETURN(std::string s, ParseString());
        return JsonValue(std::move(s));
      }
      case 't':
        return ParseLiteral("true", JsonValue(true));
      case 'f':
        return ParseLiteral("false", JsonValue(false));
      case 'n':
        return ParseLiteral("null", JsonValue());
      case '\'':
        return Error("strings need double quotes, not single quotes");
      default:
        if (Peek() == '-' || absl::ascii_isdigit(Peek())) return ParseNumber();
        return Error(absl::StrCat("expected a value, got ", Here()));
    }
  }

  absl::StatusOr<JsonValue> ParseLiteral(absl::string_view word,
                                         JsonValue value) {
    if (text_.substr(pos_, word.size()) != word) {
      return Error(absl::StrCat("expected a value, got ", Here()));
    }
    pos_ += word.size();
    return value;
  }

  absl::StatusOr<JsonValue> ParseNumber() {
    const size_t start = pos_;
    auto digits = [&] {
      size_t begin = pos_;
      while (!AtEnd() && absl::ascii_isdigit(Peek())) ++pos_;
      return pos_ - begin;
    };
    if (Peek() == '-') ++pos_;
    if (AtEnd() || !absl::ascii_isdigit(Peek())) {
      return Error("expected a digit after '-'");
    }
    if (Peek() == '0') {
      ++pos_;
      if (!AtEnd() && absl::ascii_isdigit(Peek())) {
        return Error("numbers may not have leading zeros");
      }
    } else {
      digits();
    }
    if (!AtEnd() && Peek() == '.') {
      ++pos_;
      if (digits() == 0) return Error("expected a digit after '.'");
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (digits() == 0) return Error("expected a digit in the exponent");
    }
    double value = 0;
    // SimpleAtod reports overflow as success with +-infinity; JSON has no
    // infinity, and one would slip past every range check downstream.
    if (!absl::SimpleAtod(text_.substr(start, pos_ - start), &value) ||
        !std::isfinite(value)) {
      pos_ = start;
      return Error("number out of range");
    }
    return JsonValue(value);
  }

  absl::StatusOr<uint32_t> ParseHex4() {
    if (text_.size() - pos_ < 4) return Error("truncated \\u escape");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_ + i];
      if (!absl::ascii_isxdigit(c)) return Error("bad hex digit in \\u escape");
      code = code * 16 + (absl::ascii_isdigit(c)
                              ? c - '0'
                              : absl::ascii_tolower(c) - 'a' + 10);
    }
    pos_ += 4;
    return code;
  }

  static void AppendUtf8(uint32_t code, std::string& out) {
    if (code < 0x80) {
      out.push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (code >> 6)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else if (code < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (code >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (code >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    }
  }

  absl::StatusOr<std::string> ParseString() {
    ++pos_;  // Opening quote.
    std::string out;
    while (true) {
      if (AtEnd()) return Error("unterminated string");
      char c = Peek();
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error(absl::StrCat(Here(), " inside a string; escape it"));
      }
      if (c != '\\') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (AtEnd()) return Error("unterminated string");
      char e = Peek();
      ++pos_;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          ASSIGN_OR_RETURN(uint32_t code, ParseHex4());
          if (code >= 0xd800 && code < 0xdc00) {
            if (text_.substr(pos_, 2) != "\\u") {
              return Error("unpaired UTF-16 surrogate in \\u escape");
            }
            pos_ += 2;
            ASSIGN_OR_RETURN(uint32_t low, ParseHex4());
            if (low < 0xdc00 || low >= 0xe000) {
              return Error("unpaired UTF-16 surrogate in \\u escape");
            }
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          } else if (code >= 0xdc00 && code < 0xe000) {
            return Error("unpaired UTF-16 surrogate in \\u escape");
          }
          AppendUtf8(code, out);
          break;
        }
        default:
          --pos_;
          return Error(absl::StrCat("unknown escape \\", std::string(1, e)));
      }
    }
  }

  absl::StatusOr<JsonValue> ParseArray(int depth) {
    ++pos_;  // '['
    JsonValue::Array items;
    SkipWhitespace();
    if (!AtEnd() && Peek() == ']') {
      ++pos_;
      return JsonValue(std::move(items));
    }
    while (true) {
      SkipWhitespace();
      if (!AtEnd() && Peek() == ']') {
        return Error("trailing comma before ']'");
      }
      ASSIGN_OR_RETURN(JsonValue item, ParseValue(depth + 1));
      items.push_back(std::move(item));
      SkipWhitespace();
      if (AtEnd()) return Error("unterminated list: expected ',' or ']'");
      if (Peek() == ']') {
        ++pos_;
        return JsonValue(std::move(items));
      }
      if (Peek() != ',') {
        return Error(
            absl::StrCat("expected ',' or ']' in a list, got ", Here()));
      }
      ++pos_;
    }
  }

  absl::StatusOr<JsonValue> ParseObject(int depth) {
    ++pos_;  // '{'
    JsonValue::Object members;
    SkipWhitespace();
    if (!AtEnd() && Peek() == '}') {
      ++pos_;
      return JsonValue(std::move(members));
    }
    while (true) {
      SkipWhitespace();
      if (AtEnd()) return Error("unterminated object: expected a key");
      if (Peek() == '}') return Error("trailing comma before '}'");
      if (Peek() != '"') {
        return Error(
            absl::StrCat("expected a key in double quotes, got ", Here(),
                         Peek() == '\'' ? " (JSON needs double quotes)" : ""));
      }
      const size_t key_pos = pos_;
      ASSIGN_OR_RETURN(std::string key, ParseString());
      for (const auto& member : members) {
        if (member.first == key) {
          pos_ = key_pos;
          return Error(
              absl::StrCat("duplicate key \"", key, "\"; give each key once"));
        }
      }
      SkipWhitespace();
      if (AtEnd() || Peek() != ':') {
        return Error(
            absl::StrCat("expected ':' after key \"", key, "\", got ", Here()));
      }
      ++pos_;
      SkipWhitespace();
      ASSIGN_OR_RETURN(JsonValue value, ParseValue(depth + 1));
      members.emplace_back(std::move(key), std::move(value));
      SkipWhitespace();
      if (AtEnd()) return Error("unterminated object: expected ',' or '}'");
      if (Peek() == '}') {
        ++pos_;
        return JsonValue(std::move(members));
      }
      if (Peek() != ',') {
        return Error(
            absl::StrCat("expected ',' or '}' in an object, got ", Here()));
      }
      ++pos_;
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::Find(absl::string_view key) const {
  if (kind() != Kind::kObject) return nullptr;
  for (const auto& [name, value] : object()) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::string JsonValue::Describe() const {
  switch (kind()) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return bool_value() ? "true" : "false";
    case Kind::kNumber:
      return absl::StrCat("the number ", number_value());
    case Kind::kString:
      return absl::StrCat("the string ", JsonQuote(string_value()));
    case Kind::kArray:
      return "a list";
    case Kind::kObject:
      return "an object";
  }
  return "a value";
}

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) {
  return Parser(text).ParseDocument();
}

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace psflow
