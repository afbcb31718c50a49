// CSV files (include/ingot/trainer/csv.h): the column selection of CsvOptions, the features, labels
// numbered as sklearn's LabelEncoder numbers them, and the file reading; the RFC 4180 records and
// the numbers' syntax are csv_records.cpp's.
#include "ingot/trainer/csv.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <system_error>

#include "csv_records.h"

namespace ingot {
namespace {

using detail::csv_quoted;
using detail::csv_trim;
using detail::csv_parse_number;
using detail::CsvCell;
using detail::CsvContext;
using detail::CsvNumber;
using detail::CsvReader;
using detail::CsvRecord;

constexpr size_t kShownNames = 20;               // header names listed in a message
constexpr double kF32Overflow = 0x1.ffffffp127;  // doubles at least this large round to f32 inf

// --- labels ----------------------------------------------------------------------------------

/// The label column's cells, numbered when every row is read.
class Labels {
 public:
  void add(std::string_view cell, int64_t line, int64_t col, const CsvContext& ctx) {
    const std::string_view s = csv_trim(cell);
    if (s.empty()) {
      ctx.fail(ErrorCode::kParseError, line, col, "the label is empty",
               "every row needs a label (CsvOptions::fill_value fills feature cells only): fill it in or remove "
               "the row");
    }
    texts_.emplace_back(s);
    if (!integer_) return;
    if (s.find_first_not_of("0123456789") != std::string_view::npos) {
      integer_ = false;
      std::vector<int32_t>().swap(ids_);
      return;
    }
    int64_t id = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
    if (ec != std::errc() || id > kMaxCsvClassId) {
      if (!too_large_) too_large_ = TooLarge{line, col, std::string(s)};
      id = 0;
    }
    ids_.push_back(static_cast<int32_t>(id));
    max_id_ = std::max(max_id_, id);
  }

  /// Sets out.y and out.classes.
  void finish(CsvData& out, const CsvContext& ctx) {
    const Shape shape{static_cast<int64_t>(texts_.size())};
    if (integer_) {
      if (too_large_) {
        ctx.fail(ErrorCode::kParseError, too_large_->line, too_large_->col,
                 fmt::format("the integer label {} is over {}, the largest class id read", csv_quoted(too_large_->text),
                             kMaxCsvClassId),
                 "integer labels are class ids 0, 1, ...: renumber them, or write them as text (e.g. 'id42') to "
                 "have them numbered in sorted order");
      }
      for (int64_t i = 0; i <= max_id_; ++i) out.classes.push_back(std::to_string(i));
      out.y = Array::from_vector<int32_t>(ids_, shape);
      return;
    }
    out.classes = texts_;
    std::sort(out.classes.begin(), out.classes.end());
    out.classes.erase(std::unique(out.classes.begin(), out.classes.end()), out.classes.end());
    std::vector<int32_t> ids(texts_.size());
    for (size_t i = 0; i < texts_.size(); ++i) {
      const auto it = std::lower_bound(out.classes.begin(), out.classes.end(), texts_[i]);
      ids[i] = static_cast<int32_t>(it - out.classes.begin());
    }
    out.y = Array::from_vector<int32_t>(ids, shape);
  }

 private:
  std::vector<std::string> texts_;
  std::vector<int32_t> ids_;  // while every label is an integer
  bool integer_ = true;
  int64_t max_id_ = -1;
  struct TooLarge {
    int64_t line, col;
    std::string text;
  };
  std::optional<TooLarge> too_large_;  // the first integer label over kMaxCsvClassId
};

// --- options and columns ---------------------------------------------------------------------

void check_options(const CsvOptions& o, const std::string& name) {
  auto bad = [&](const std::string& message, const std::string& hint) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", name, message), hint);
  };
  if (o.delimiter == '"' || o.delimiter == '\r' || o.delimiter == '\n') {
    bad(fmt::format("CsvOptions::delimiter is {}, which cannot separate cells",
                    csv_quoted(std::string(1, o.delimiter))),
        "use ',', ';', '\\t', '|' or another byte that is not '\"' or a line end");
  }
  if (o.dtype != DType::kF32 && o.dtype != DType::kF64) {
    bad(fmt::format("CsvOptions::dtype is {}, but features are read as f32 or f64", dtype_name(o.dtype)),
        "use DType::kF32 (the default) or DType::kF64, and convert x afterwards for another dtype");
  }
  if (!o.columns.empty() && !o.column_indices.empty()) {
    bad("CsvOptions::columns and column_indices are both given",
        "choose the feature columns one way: by name or by index");
  }
  if (o.label_column && o.label_index) {
    bad("CsvOptions::label_column and label_index are both given",
        "choose the label column one way: by name or by index");
  }
  if (!o.header && (!o.columns.empty() || o.label_column)) {
    bad(fmt::format("CsvOptions::{} chooses a column by name, but header is false (the file has no names)",
                    o.label_column ? "label_column" : "columns"),
        "set header = true if the first line holds the names, or choose by index with column_indices / label_index");
  }
  if (o.fill_value && o.dtype == DType::kF32 && std::isfinite(*o.fill_value) &&
      std::fabs(*o.fill_value) >= kF32Overflow) {
    bad(fmt::format("CsvOptions::fill_value {} is too large for f32", *o.fill_value),
        "use a fill value within f32's range (|v| <= 3.4028235e38), or dtype = DType::kF64");
  }
}

/// "'a', 'b', 'c'" (the first kShownNames, then how many in all).
std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kShownNames; ++i) out += (i == 0 ? "" : ", ") + csv_quoted(names[i]);
  if (names.size() > kShownNames) out += fmt::format(", ... ({} in all)", names.size());
  return out;
}

int64_t find_column(const CsvContext& ctx, const std::string& name, const std::string& option) {
  std::vector<int64_t> hits;
  for (size_t i = 0; i < ctx.names.size(); ++i) {
    if (ctx.names[i] == name) hits.push_back(static_cast<int64_t>(i));
  }
  if (hits.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} is {}, which is not a column of the header; its columns are {}", ctx.name, option,
                            csv_quoted(name), name_list(ctx.names)),
                "name columns as the header does (compared exactly, without spaces around), or choose them by "
                "index with CsvOptions::column_indices / label_index");
  }
  if (hits.size() > 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} is {}, but the header has {} columns of that name (columns {} and {})", ctx.name,
                            option, csv_quoted(name), hits.size(), hits[0] + 1, hits[1] + 1),
                "choose the column by its 0-based index with CsvOptions::column_indices / label_index");
  }
  return hits[0];
}

int64_t check_index(const CsvContext& ctx, int64_t index, int64_t ncols, const std::string& option) {
  if (index < 0 || index >= ncols) {
    throw Error(
        ErrorCode::kOutOfRange,
        fmt::format("{}: {} is {}, outside [0, {}) (the file has {} columns)", ctx.name, option, index, ncols, ncols),
        fmt::format("column indices are 0-based: the first column is 0, the last {}", ncols - 1));
  }
  return index;
}

struct Selection {
  std::vector<int64_t> features;  // column indices, in x's order
  std::optional<int64_t> label;
};

Selection select_columns(const CsvOptions& o, const CsvContext& ctx, int64_t ncols) {
  Selection sel;
  if (o.label_column) sel.label = find_column(ctx, *o.label_column, "CsvOptions::label_column");
  if (o.label_index) sel.label = check_index(ctx, *o.label_index, ncols, "CsvOptions::label_index");
  for (size_t i = 0; i < o.columns.size(); ++i) {
    sel.features.push_back(find_column(ctx, o.columns[i], fmt::format("CsvOptions::columns[{}]", i)));
  }
  for (size_t i = 0; i < o.column_indices.size(); ++i) {
    sel.features.push_back(
        check_index(ctx, o.column_indices[i], ncols, fmt::format("CsvOptions::column_indices[{}]", i)));
  }
  if (o.columns.empty() && o.column_indices.empty()) {
    for (int64_t j = 0; j < ncols; ++j) {
      if (j != sel.label) sel.features.push_back(j);
    }
  }
  const char* list = o.columns.empty() ? "column_indices" : "columns";
  std::vector<int64_t> chosen_at(static_cast<size_t>(ncols), -1);
  for (size_t i = 0; i < sel.features.size(); ++i) {
    const int64_t j = sel.features[i];
    if (j == sel.label) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} is the label column and also a feature (CsvOptions::{}[{}])", ctx.name,
                              ctx.column(j), list, i),
                  fmt::format("a column is the label or a feature, not both: remove it from CsvOptions::{}", list));
    }
    int64_t& at = chosen_at[static_cast<size_t>(j)];
    if (at >= 0) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("{}: {} is chosen twice (CsvOptions::{}[{}] and [{}])", ctx.name, ctx.column(j), list, at, i),
          "choose each feature column once");
    }
    at = static_cast<int64_t>(i);
  }
  if (sel.features.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: no feature column is left: the only column is the label", ctx.name),
                "training data needs at least one feature column besides the label");
  }
  return sel;
}

// --- rows ------------------------------------------------------------------------------------

/// Appends the row's features to `out`.
template <class T>
void add_features(const CsvRecord& rec, const Selection& sel, const CsvOptions& o, const CsvContext& ctx,
                  std::vector<T>& out) {
  for (const int64_t j : sel.features) {
    const CsvCell& c = rec.cells[static_cast<size_t>(j)];
    const std::string_view s = csv_trim(c.text());
    T value{};
    if (s.empty()) {
      if (!o.fill_value) {
        ctx.fail(ErrorCode::kParseError, c.line, j, "the cell is empty (a missing value)",
                 "pass CsvOptions::fill_value (e.g. NaN, as pandas.read_csv reads missing values, or 0) to fill "
                 "missing cells, or fill them in");
      }
      value = static_cast<T>(*o.fill_value);
    } else {
      const CsvNumber parsed = csv_parse_number(s, value);
      if (parsed == CsvNumber::kNotNumber) {
        ctx.fail(ErrorCode::kParseError, c.line, j, fmt::format("{} is not a number", csv_quoted(c.text())),
                 "feature cells hold decimal numbers (1, -2.5, 3e-4, inf, nan): choose numeric columns with "
                 "CsvOptions::columns / column_indices, or make a text column the label");
      }
      if (parsed == CsvNumber::kTooLarge) {
        ctx.fail(ErrorCode::kParseError, c.line, j,
                 fmt::format("{} is out of range: too large for {} (largest finite {})", csv_quoted(c.text()),
                             dtype_name(dtype_of_v<T>), std::numeric_limits<T>::max()),
                 "read the features as f64 (CsvOptions::dtype = DType::kF64) or rescale the column; write "
                 "'inf' for an infinity");
      }
    }
    out.push_back(value);
  }
}

template <class T>
CsvData read_rows(CsvReader& reader, CsvRecord& rec, const CsvContext& ctx, const Selection& sel, const CsvOptions& o,
                  size_t ncols, int64_t first_line) {
  std::vector<T> values;
  Labels labels;
  int64_t rows = 0;
  do {
    if (rec.cells.size() != ncols) {
      const std::string_view raw = reader.raw(rec);
      ctx.fail(ErrorCode::kParseError, rec.line, -1,
               fmt::format("{} cell{}, expected {} as in the {} (line {}): {}", rec.cells.size(),
                           rec.cells.size() == 1 ? "" : "s", ncols, o.header ? "header" : "first row", first_line,
                           csv_quoted(raw)),
               raw.empty() ? "remove blank lines between rows"
                           : "every row needs one cell per column: quote cells that hold the delimiter (\"a,b\"), "
                             "and leave a missing value as an empty cell");
    }
    add_features<T>(rec, sel, o, ctx, values);
    if (sel.label) {
      const CsvCell& c = rec.cells[static_cast<size_t>(*sel.label)];
      labels.add(c.text(), c.line, *sel.label, ctx);
    }
    ++rows;
  } while (reader.next(rec));
  CsvData out;
  out.x = Array::from_vector<T>(values, {rows, static_cast<int64_t>(sel.features.size())});
  if (sel.label) labels.finish(out, ctx);
  return out;
}

// --- files -----------------------------------------------------------------------------------

Error file_error(const std::string& what, const std::string& path, int err) {
  return Error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
               fmt::format("load_csv: {} '{}' failed: {}", what, path, std::strerror(err)),
               "check that the path and its directory exist and are readable");
}

std::string read_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO does not wait for a writer (it is refused below); regular files
  // ignore the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw file_error("opening", path, errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw file_error("inspecting", path, errno);
  if (!S_ISREG(st.st_mode)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("load_csv: '{}' is not a regular file", path),
                "pass the path of a CSV file");
  }
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw file_error("reading", path, errno);
    if (n == 0) return text;
    text.append(buffer, static_cast<size_t>(n));
  }
}

CsvData parse(std::string_view text, const CsvOptions& o, const std::string& name) {
  check_options(o, name);
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  CsvContext ctx{name, {}};
  CsvReader reader(text, o.delimiter, ctx);
  CsvRecord rec;
  if (!reader.next(rec)) {
    throw Error(
        ErrorCode::kParseError, fmt::format("{} is empty: it holds no records", name),
        o.header ? "a CSV file holds a header line, then one line per row" : "a CSV file holds one line per row");
  }
  const size_t ncols = rec.cells.size();
  const int64_t first_line = rec.line;
  if (o.header) {
    for (size_t i = 0; i < rec.cells.size(); ++i) ctx.names.emplace_back(csv_trim(rec.cells[i].text()));
    if (!reader.next(rec)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} has a header (line {}) but no rows", name, first_line),
                  "add rows after the header, or set CsvOptions::header = false if that line is data");
    }
  }
  const Selection sel = select_columns(o, ctx, static_cast<int64_t>(ncols));
  CsvData out = o.dtype == DType::kF64 ? read_rows<double>(reader, rec, ctx, sel, o, ncols, first_line)
                                       : read_rows<float>(reader, rec, ctx, sel, o, ncols, first_line);
  for (const int64_t j : sel.features) {
    out.feature_names.push_back(o.header ? ctx.names[static_cast<size_t>(j)] : fmt::format("column {}", j + 1));
  }
  return out;
}

/// Runs `body`, turning every exception other than ingot::Error into one (`source`: the file or
/// the name for errors).
template <class F>
CsvData guarded(const char* function, const std::string& source, F&& body) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kOutOfMemory, fmt::format("{}: out of memory reading {}", function, source),
                "read fewer columns (CsvOptions::columns) or split the file");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInternal, fmt::format("{}: unexpected failure reading {}: {}", function, source, e.what()));
  }
}

}  // namespace

CsvData parse_csv(std::string_view text, const CsvOptions& options, const std::string& name_for_errors) {
  return guarded("parse_csv", name_for_errors, [&] { return parse(text, options, name_for_errors); });
}

CsvData load_csv(const std::string& path, const CsvOptions& options) {
  return guarded("load_csv", path, [&] {
    const std::string text = read_file(path);
    return parse(text, options, fmt::format("'{}'", path));
  });
}

}  // namespace ingot
