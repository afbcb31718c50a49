// The record reader of the CSV loader (trainer/csv.cpp, public header ingot/trainer/csv.h): splits
// CSV text into records of cells as RFC 4180 describes (quoted cells with "" escapes, delimiters
// and line ends inside quotes), with LF and lone CR line ends too; parses the numbers of feature
// cells; and words the messages that point at a line and a column. Internal to trainer/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ingot/runtime/error.h"

namespace ingot::detail {

/// Bytes of a text shown in a message (csv_quoted cuts after them).
inline constexpr size_t kCsvShownBytes = 40;

/// `text` in single quotes for a message: control bytes escaped (\n, \r, \t, \xNN), cut after
/// kCsvShownBytes bytes (not inside a UTF-8 sequence) with "...".
std::string csv_quoted(std::string_view text);

/// `s` without the spaces and tabs around it.
std::string_view csv_trim(std::string_view s);

/// What csv_parse_number found.
enum class CsvNumber { kNumber, kNotNumber, kTooLarge };

/// Parses the trimmed cell `s` as a decimal in std::from_chars' syntax (C's strtod without
/// hexadecimals: "1", "-2.5", ".5", "3e-4", "inf", "infinity", "nan", any case), a leading '+'
/// allowed, correctly rounded to `value`'s type. A value below the type's smallest denormal
/// becomes a zero of its sign; one too large for the type is kTooLarge; anything else (also
/// trailing text, "0x10", "+-1", "") is kNotNumber. `value` is set only for kNumber.
CsvNumber csv_parse_number(std::string_view s, float& value);
CsvNumber csv_parse_number(std::string_view s, double& value);

/// The source's name and header, for messages that say where something is.
struct CsvContext {
  const std::string& name;         ///< the source, as messages name it (e.g. "'iris.csv'")
  std::vector<std::string> names;  ///< the header's names; empty without a header (or before it is read)

  /// "column 3 ('petal_width')" for the 0-based column `col`, or "column 3" without a name.
  std::string column(int64_t col) const;
  /// Throws ingot::Error(`code`, "name, line L, column C ('x'): message", hint); without the
  /// column when `col` < 0.
  [[noreturn]] void fail(ErrorCode code, int64_t line, int64_t col, const std::string& message,
                         const std::string& hint) const;
};

/// One cell: a view of the source text, or (a quoted cell with "" escapes) its own unescaped copy.
struct CsvCell {
  std::string_view view;
  std::string owned;
  bool escaped = false;
  int64_t line = 0;  ///< the 1-based line where the cell starts
  std::string_view text() const { return escaped ? std::string_view(owned) : view; }
};

/// One record (a row, or the header).
struct CsvRecord {
  std::vector<CsvCell> cells;
  int64_t line = 0;           ///< the 1-based line where the record starts
  size_t begin = 0, end = 0;  ///< its text in the source, without the line end
};

/// Reads the records of `text` one at a time. The text must outlive the records read. A quoted
/// cell that is never closed, or text other than spaces and tabs between a closing quote and the
/// delimiter or the line end, throws ingot::Error(kParseError) through `ctx`.
class CsvReader {
 public:
  CsvReader(std::string_view text, char delimiter, const CsvContext& ctx) : text_(text), delim_(delimiter), ctx_(ctx) {}

  /// Reads the next record into `r`; false (and `r` unchanged) when nothing but line ends is left
  /// (so blank lines at the end are ignored, and a blank line between rows is a record of one
  /// empty cell).
  bool next(CsvRecord& r);
  /// The text of record `r` (without its line end).
  std::string_view raw(const CsvRecord& r) const { return text_.substr(r.begin, r.end - r.begin); }

 private:
  bool at_cell_end() const;
  void read_quoted(CsvCell& c, int64_t col);
  void count_lines(size_t from, size_t to);

  std::string_view text_;
  char delim_;
  const CsvContext& ctx_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

}  // namespace ingot::detail
