// CSVLogger and python_float / csv_field: Keras 3's keras.callbacks.CSVLogger over Python's csv
// module (excel dialect) and repr(float). Guide: docs/trainer-callbacks.md, "CSVLogger".
#include "ingot/trainer/callbacks_logging.h"
#include "ingot/trainer/model.h"
#include "ingot/trainer/output_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "ingot/runtime/error.h"

namespace ingot::callbacks {
namespace {

namespace fs = std::filesystem;

Error csv_error(const std::string& what, const std::string& hint) {
  return Error(ErrorCode::kInvalidArgument, "CSVLogger: " + what, hint);
}

void check_options(const CSVLoggerOptions& o) {
  if (o.filename.empty() && o.write != CSVLoggerWrite::kInMemory) {
    throw csv_error("filename is empty", "pass the CSV file to write, e.g. \"training.csv\"");
  }
  if (o.separator.size() != 1 || o.separator.find_first_of("\"\r\n") != std::string::npos) {
    throw csv_error("separator = '" + o.separator + "' is not one character other than '\"', '\\r', '\\n'",
                    "pass a single-character delimiter such as \",\", \";\" or \"\\t\"");
  }
}

/// The whole content of `path`, or "" when it does not exist. Unreadable: kInvalidArgument.
std::string read_if_exists(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return "";
  if (fs::is_fifo(path, ec)) {  // reading it would block until a writer comes
    throw csv_error("'" + path + "' is a FIFO, which append = true would have to read first",
                    "pass the path of a CSV file, or append = false to write into the FIFO");
  }
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  if (!f) throw csv_error("cannot read '" + path + "': " + std::strerror(errno), "check the file's permissions");
  return s.str();
}

/// Writes `text` to `path` (`mode` std::ios::app or trunc); kInvalidArgument naming the file.
void write_to(const std::string& path, const std::string& text, std::ios::openmode mode) {
  std::ofstream f(path, std::ios::binary | mode);
  f << text;
  f.close();
  if (!f) {
    throw csv_error("cannot write '" + path + "': " + std::strerror(errno),
                    "check that the folder exists and is writable");
  }
}

/// `text` becomes the content of `path` at once (output_file.h: no partial file, links and
/// special files respected).
void replace_file(const std::string& path, const std::string& text) {
  try {
    write_output_file(path, text, "CSVLogger");
  } catch (const Error& e) {
    throw csv_error("cannot write '" + path + "': " + e.message(), "check that the folder exists and is writable");
  }
}

}  // namespace

std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::array<char, 64> buf{};
  const auto end = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::scientific).ptr;
  std::string s(buf.data(), end);  // "[-]d[.ddd]e[+-]XX": the shortest round-trip digits
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const size_t e = s.find('e');
  const int exp = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  if (exp < -4 || exp >= 16) {
    const std::string mantissa = digits.size() > 1 ? digits.substr(0, 1) + "." + digits.substr(1) : digits;
    return sign + fmt::format("{}e{}{:02d}", mantissa, exp < 0 ? '-' : '+', std::abs(exp));
  }
  if (exp < 0) return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const auto whole = static_cast<size_t>(exp + 1);
  if (digits.size() <= whole) return sign + digits + std::string(whole - digits.size(), '0') + ".0";
  return sign + digits.substr(0, whole) + "." + digits.substr(whole);
}

std::string csv_field(const std::string& field, const std::string& separator) {
  const bool needs_quotes = field.find_first_of("\"\r\n") != std::string::npos ||
                            (!separator.empty() && field.find(separator) != std::string::npos);
  if (!needs_quotes) return field;
  std::string q = "\"";
  for (char ch : field) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

CSVLogger::CSVLogger(CSVLoggerOptions options) : options_(std::move(options)) { check_options(options_); }

void CSVLogger::on_train_begin(const Logs&) {
  keys_.clear();
  started_ = false;
  text_.clear();
  previous_.clear();
  write_header_ = true;
  // Several processes log the same values (their metrics are reduced over all of them): process 0
  // writes the file.
  if (options_.write == CSVLoggerWrite::kInMemory || (model() != nullptr && model()->process_id() != 0)) return;
  if (options_.append) {
    // Keras: the header is written unless the existing file's first line is non-empty.
    previous_ = read_if_exists(options_.filename);
    write_header_ = previous_.empty() || previous_[0] == '\n' || previous_[0] == '\r';
  }
  if (options_.write == CSVLoggerWrite::kEachEpoch) {
    write_to(options_.filename, "", options_.append ? std::ios::app : std::ios::trunc);
    previous_.clear();
  }
}

std::vector<std::string> CSVLogger::columns_of(const Logs& logs) {
  std::vector<std::string> keys;
  for (const auto& [name, value] : logs) keys.push_back(name);
  std::sort(keys.begin(), keys.end());
  const bool has_val =
      std::any_of(keys.begin(), keys.end(), [](const std::string& k) { return k.starts_with("val_"); });
  if (!has_val) {
    const size_t n = keys.size();
    for (size_t i = 0; i < n; ++i) keys.push_back("val_" + keys[i]);
  }
  return keys;
}

void CSVLogger::on_epoch_end(int64_t epoch, const Logs& logs) {
  const std::vector<std::string> keys = started_ ? keys_ : columns_of(logs);
  std::string lines;
  if (!started_ && write_header_) {
    lines = "epoch";
    for (const std::string& key : keys) lines += options_.separator + csv_field(key, options_.separator);
    lines += "\r\n";
  }
  lines += std::to_string(epoch);
  for (const std::string& key : keys) {
    const std::optional<double> v = logs.get(key);
    lines += options_.separator + (v ? python_float(*v) : std::string("NA"));
  }
  lines += "\r\n";
  const bool writes = model() == nullptr || model()->process_id() == 0;
  if (options_.write == CSVLoggerWrite::kEachEpoch && writes) write_to(options_.filename, lines, std::ios::app);
  keys_ = keys;  // only once the row is written: a failed write changes nothing
  started_ = true;
  text_ += lines;
}

void CSVLogger::on_train_end(const Logs&) {
  const bool writes = model() == nullptr || model()->process_id() == 0;
  if (options_.write == CSVLoggerWrite::kAtTrainEnd && writes) replace_file(options_.filename, previous_ + text_);
}

}  // namespace ingot::callbacks
