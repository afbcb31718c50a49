// The CSV record reader (csv_records.h): RFC 4180's grammar (section 2), read leniently as
// Python's csv module and pandas.read_csv read it: LF and lone CR line ends besides CRLF, spaces
// after a closing quote, and a '"' inside an unquoted cell kept as an ordinary character; and the
// numbers of feature cells, std::from_chars' decimals.
#include "csv_records.h"

#include <fmt/format.h>

#include <charconv>
#include <system_error>

namespace ingot::detail {
namespace {

/// Whether the decimal `s` (as from_chars accepted it, reporting it out of range) is too large
/// rather than too small: its decimal exponent, 10^k <= |value| < 10^(k+1), is positive.
bool too_large(std::string_view s) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  int64_t int_digits = 0, leading_zeros = 0;
  bool nonzero = false, point = false;
  for (; i < s.size() && s[i] != 'e' && s[i] != 'E'; ++i) {
    if (s[i] == '.') {
      point = true;
      continue;
    }
    nonzero = nonzero || s[i] != '0';
    if (!point && nonzero) ++int_digits;
    if (point && !nonzero) ++leading_zeros;
  }
  int64_t exponent = 0;
  const bool negative = i + 1 < s.size() && s[i + 1] == '-';
  for (i += (i + 1 < s.size() && (s[i + 1] == '-' || s[i + 1] == '+')) ? 2 : 1; i < s.size(); ++i) {
    if (exponent < 1'000'000'000) exponent = exponent * 10 + (s[i] - '0');
  }
  if (negative) exponent = -exponent;
  return nonzero && (int_digits > 0 ? exponent + int_digits > 0 : exponent - leading_zeros > 0);
}

template <class T>
CsvNumber parse_number(std::string_view s, T& value) {
  if (!s.empty() && s[0] == '+') {
    s.remove_prefix(1);
    if (s.empty() || s[0] == '-' || s[0] == '+') return CsvNumber::kNotNumber;
  }
  T parsed{};
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), parsed);
  if (s.empty() || ptr != s.data() + s.size()) return CsvNumber::kNotNumber;
  if (ec == std::errc::result_out_of_range) {
    if (too_large(s)) return CsvNumber::kTooLarge;
    parsed = s[0] == '-' ? -T(0) : T(0);  // below the smallest denormal
  } else if (ec != std::errc()) {
    return CsvNumber::kNotNumber;
  }
  value = parsed;
  return CsvNumber::kNumber;
}

}  // namespace

CsvNumber csv_parse_number(std::string_view s, float& value) { return parse_number(s, value); }
CsvNumber csv_parse_number(std::string_view s, double& value) { return parse_number(s, value); }

std::string csv_quoted(std::string_view text) {
  std::string out = "'";
  size_t shown = 0;
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (shown >= kCsvShownBytes && (b & 0xc0) != 0x80) {
      out += "...";
      break;
    }
    ++shown;
    if (b >= 0x20 && b != 0x7f) {
      out += c;
      continue;
    }
    out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : fmt::format("\\x{:02x}", b);
  }
  return out + "'";
}

std::string_view csv_trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::string CsvContext::column(int64_t col) const {
  const auto i = static_cast<size_t>(col);
  return i < names.size() ? fmt::format("column {} ({})", col + 1, csv_quoted(names[i]))
                          : fmt::format("column {}", col + 1);
}

void CsvContext::fail(ErrorCode code, int64_t line, int64_t col, const std::string& message,
                      const std::string& hint) const {
  const std::string where = col >= 0 ? fmt::format("line {}, {}", line, column(col)) : fmt::format("line {}", line);
  throw Error(code, fmt::format("{}, {}: {}", name, where, message), hint);
}

bool CsvReader::next(CsvRecord& r) {
  if (text_.find_first_not_of("\r\n", pos_) == std::string_view::npos) return false;
  r.cells.clear();
  r.line = line_;
  r.begin = pos_;
  while (true) {
    CsvCell& c = r.cells.emplace_back();
    c.line = line_;
    if (pos_ < text_.size() && text_[pos_] == '"') {
      read_quoted(c, static_cast<int64_t>(r.cells.size()) - 1);
    } else {
      const size_t start = pos_;
      while (!at_cell_end()) ++pos_;
      c.view = text_.substr(start, pos_ - start);
    }
    if (pos_ < text_.size() && text_[pos_] == delim_) {
      ++pos_;
      continue;
    }
    r.end = pos_;
    if (pos_ < text_.size() && text_[pos_] == '\r') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '\n') ++pos_;
    ++line_;
    return true;
  }
}

bool CsvReader::at_cell_end() const {
  return pos_ >= text_.size() || text_[pos_] == delim_ || text_[pos_] == '\n' || text_[pos_] == '\r';
}

void CsvReader::read_quoted(CsvCell& c, int64_t col) {
  const size_t open = pos_;
  const int64_t open_line = line_;
  size_t segment = ++pos_;
  while (true) {
    const size_t q = text_.find('"', pos_);
    if (q == std::string_view::npos) {
      ctx_.fail(ErrorCode::kParseError, open_line, col,
                fmt::format("the quoted cell {} is never closed", csv_quoted(text_.substr(open))),
                "end a quoted cell with '\"' (a '\"' inside a quoted cell is written '\"\"')");
    }
    count_lines(pos_, q);
    pos_ = q + 1;
    if (pos_ < text_.size() && text_[pos_] == '"') {  // "" stands for one '"'
      c.escaped = true;
      c.owned.append(text_.substr(segment, pos_ - segment));
      segment = ++pos_;
      continue;
    }
    if (c.escaped) {
      c.owned.append(text_.substr(segment, q - segment));
    } else {
      c.view = text_.substr(segment, q - segment);
    }
    break;
  }
  while (pos_ < text_.size() && text_[pos_] != delim_ && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  if (!at_cell_end()) {
    ctx_.fail(ErrorCode::kParseError, line_, col,
              fmt::format("{} follows the closing quote of a quoted cell",
                          csv_quoted(text_.substr(pos_, text_.find_first_of("\r\n", pos_) - pos_))),
              "a quoted cell ends at its closing '\"', before the delimiter or the line's end; write a '\"' inside "
              "a quoted cell as '\"\"'");
  }
}

void CsvReader::count_lines(size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (text_[i] == '\n' || (text_[i] == '\r' && (i + 1 >= text_.size() || text_[i + 1] != '\n'))) ++line_;
  }
}

}  // namespace ingot::detail
