// Data in CSV files: a table of numeric feature columns and an optional label column, read into
// the arrays fit takes (x (rows, features) f32 or f64, y (rows,) i32 class ids).
//
// The syntax is RFC 4180 ("Common Format and MIME Type for Comma-Separated Values (CSV) Files"):
//   - a file is records separated by line ends (CRLF, LF, or a lone CR), the last one optionally
//     followed by a line end; a UTF-8 byte order mark (EF BB BF) at the start is skipped;
//   - a record is cells separated by the delimiter (CsvOptions::delimiter, ',' by default);
//   - a cell that starts with '"' is quoted: it ends at the next '"' not doubled, and may hold
//     delimiters, line ends and '""' (one '"'); spaces or tabs may follow the closing quote, then
//     the delimiter or the line end must; a '"' inside an unquoted cell is an ordinary character;
//   - every record has the same number of cells as the first one (the header, if there is one).
// Beyond RFC 4180, as pandas.read_csv and numpy.genfromtxt read such files: the first record may
// be a header of column names (CsvOptions::header, pandas' header=0); blank lines at the end of the
// file are ignored (a blank line between rows is a record of one empty cell, so it has the wrong
// number of cells); spaces and tabs around a cell's text are ignored (also inside quotes); an
// empty cell of a feature column is a missing value, which becomes CsvOptions::fill_value
// (pandas' na_values "" with fillna, genfromtxt's filling_values) or is an error without one.
//
// Feature cells are decimal numbers in std::from_chars' syntax for double (the C locale's strtod
// without hexadecimal): "1", "-2.5", ".5", "3e-4", "inf", "-inf", "infinity", "nan" (any case),
// and a leading '+' ("+1.5"). Each is rounded once to the dtype (correctly rounded decimal to f32
// or f64); a value too small for the dtype becomes 0 (keeping its sign), one too large is an error
// (only the text "inf" gives an infinity).
//
// Labels are numbered as sklearn.preprocessing.LabelEncoder numbers them, with integer labels kept
// as class ids (as Keras's sparse labels): if every label is an integer literal (digits only),
// y holds those integers and the classes are "0", "1", ..., up to the largest; otherwise the
// distinct label texts sorted by std::string's order (byte order: LabelEncoder's numpy.unique
// order for ASCII text) are classes 0, 1, ..., so y == i means classes[i].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ingot/runtime/array.h"

namespace ingot {

/// Largest integer label read as a class id: integer labels above it (which would make a list of
/// that many classes; such numbers are rarely class ids) are an error. 2^20 - 1, so that the
/// class names a label implies ("0" ... "1048575", ~32 MB) stay small next to any file: with
/// 2^24 a 10-byte file made parse_csv build 16.7 million names (~540 MB; found by fuzz_csv).
inline constexpr int64_t kMaxCsvClassId = (int64_t{1} << 20) - 1;

/// How load_csv / parse_csv read a file: the delimiter, the header, which columns are features
/// and which is the label, missing values and the features' dtype. Columns are chosen either by
/// name (needs a header) or by 0-based index, not both. Column indices are 0-based here; messages
/// and the names of columns without a header ("column N") count cells from 1, so index i is
/// "column i+1".
struct CsvOptions {
  /// Separates cells (',' for CSV, '\t' for TSV, ';' ...): any byte except '"', '\r' and '\n'.
  char delimiter = ',';
  /// The first record holds the column names (pandas' header=0); false: every record is a row
  /// (header=None).
  bool header = true;
  /// Feature columns by header name, in x's order. Empty (and column_indices empty): every column
  /// except the label, in the file's order. Needs header.
  std::vector<std::string> columns;
  /// Or feature columns by 0-based index, in x's order (not with `columns`).
  std::vector<int64_t> column_indices;
  /// The label column by header name (needs header), or none: y is absent.
  std::optional<std::string> label_column;
  /// Or the label column by 0-based index (not with label_column).
  std::optional<int64_t> label_index;
  /// What a missing (empty) feature cell becomes (e.g. NaN, as pandas.read_csv reads it, or 0);
  /// unset: a missing cell is an error. Labels are never filled: a missing label is an error.
  std::optional<double> fill_value;
  /// The features' dtype: DType::kF32 or DType::kF64.
  DType dtype = DType::kF32;
};

/// What load_csv / parse_csv read.
struct CsvData {
  /// The features: (rows, features) of CsvOptions::dtype, row i being the file's i-th row (the
  /// header not counted), column j the j-th chosen feature column.
  Array x;
  /// The labels as class ids: (rows,) int32 in [0, classes.size()); absent without a label column.
  std::optional<Array> y;
  /// x's columns' names, in x's order: the header's names, or "column N" (N counting cells from
  /// 1) without a header.
  std::vector<std::string> feature_names;
  /// The class names: y == i means classes[i] ("0", "1", ... for integer labels, else the sorted
  /// distinct label texts). Empty without a label column.
  std::vector<std::string> classes;
};

/// Reads the CSV text `text` (see the file comment for the syntax, the numbers and the label
/// numbering) into x, y and the names. `name_for_errors` names the source in messages, as is
/// (load_csv passes the path in single quotes, e.g. "'iris.csv'").
///
/// Throws ingot::Error, naming the source and, for a cell, "line L, column C ('name')" (L the
/// 1-based line where the record or cell starts, C the 1-based cell number, the header's name of
/// the column when there is a header), the text found (quoted, cut to 40 bytes) and what was
/// expected, with a hint saying what to do:
///  - kInvalidArgument for bad options, checked before the text is read: a delimiter of '"', '\r'
///    or '\n'; a dtype other than f32/f64; both `columns` and `column_indices`, or both
///    label_column and label_index; `columns` or label_column without a header; a fill_value too
///    large for f32 with dtype f32;
///  - kParseError for an empty text (nothing but line ends, after a byte order mark);
///  - kInvalidArgument for a header without rows;
///  - kInvalidArgument for a column name not in the header (listing the header's names) or in it
///    twice; kOutOfRange for a column index outside [0, the number of columns); kInvalidArgument
///    for a column chosen twice, the label column also chosen as a feature, and no feature column
///    left (a file of one column that is the label);
///  - kParseError for a record whose number of cells differs from the first record's (naming both
///    counts and both lines; a blank line between rows is such a record); a quote that is never
///    closed (naming the line where it opened); other text than spaces, tabs, the delimiter or
///    the line end after a closing quote; a feature cell that is not a number ("line 7, column 3
///    ('petal_width'): 'abc' is not a number"); a number too large for the dtype (e.g. "1e39" for
///    f32); an empty feature cell without fill_value (the hint says to pass CsvOptions::fill_value);
///    an empty label cell; an integer label over kMaxCsvClassId (when every label is an integer);
///  - kOutOfMemory when the arrays or the cells do not fit in memory.
/// No other exception escapes.
CsvData parse_csv(std::string_view text, const CsvOptions& options, const std::string& name_for_errors);

/// Reads the CSV file at `path` (pandas.read_csv(path) with the options' header, usecols, label
/// and fillna; see parse_csv for the syntax, the arrays and the errors, named "'path'"). Also
/// throws ingot::Error: kNotFound when there is no file at `path`; kInvalidArgument when it cannot
/// be opened or read (no permission, ...) or is not a regular file (a directory, a pipe), naming
/// the path and the system's reason.
CsvData load_csv(const std::string& path, const CsvOptions& options = {});

}  // namespace ingot
