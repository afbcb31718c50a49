// The .npy format's header, element codec and mapped files (trainer/npy_format.h). The header
// grammar is NumPy's (numpy/lib/format.py: read_array_header_1_0 parses it with
// ast.literal_eval; _write_array_header writes it); NEP 1 describes the format.
#include "npy_format.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <vector>

#include "ingot/runtime/error.h"
#include "ingot/trainer/npy.h"

namespace ingot::detail {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMagicBytes = 6;

/// One dtype NumPy writes and ingot has: the kind+size part of 'descr' (after the byte-order char).
struct DescrCode {
  std::string_view code;
  DType dtype;
};
constexpr DescrCode kDescrCodes[] = {
    {"b1", DType::kBool}, {"i1", DType::kI8},  {"u1", DType::kU8},  {"i4", DType::kI32}, {"u4", DType::kU32},
    {"i8", DType::kI64},  {"u8", DType::kU64}, {"f2", DType::kF16}, {"f4", DType::kF32}, {"f8", DType::kF64}};

/// A value of the header dict: a string, a bool, an integer, or a tuple/list of values.
struct PyValue {
  enum class Kind { kString, kBool, kInt, kTuple, kList } kind = Kind::kInt;
  std::string text;            ///< kString
  bool flag = false;           ///< kBool
  int64_t number = 0;          ///< kInt
  std::vector<PyValue> items;  ///< kTuple, kList
};

/// Recursive-descent parser of the Python literal NumPy writes as the header: a dict of string
/// keys. Errors name the source and the byte offset in the file.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, int64_t base, const std::string& name) : text_(text), base_(base), name_(name) {}

  std::vector<std::pair<std::string, PyValue>> parse_dict() {
    std::vector<std::pair<std::string, PyValue>> out;
    expect('{', "'{' starting the header dict");
    while (true) {
      skip_space();
      if (peek() == '}') break;
      PyValue key = parse_value(0);
      if (key.kind != PyValue::Kind::kString) fail("a string key ('descr', 'fortran_order' or 'shape')");
      expect(':', "':' after the key");
      out.emplace_back(key.text, parse_value(0));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("',' or '}' after a value");
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail("the end of the header after the dict");
    return out;
  }

  [[noreturn]] void fail(const std::string& expected) const {
    const std::string_view rest = text_.substr(std::min(pos_, text_.size()));
    throw Error(
        ErrorCode::kParseError,
        fmt::format("{}: bad .npy header at byte {}: expected {}, found {}", name_, base_ + static_cast<int64_t>(pos_),
                    expected, rest.empty() ? std::string("the end of the header") : "'" + quote_bytes(rest, 40) + "'"),
        "the file is corrupt or was not written by numpy.save; re-save it with numpy.save");
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
  }
  void expect(char c, const char* what) {
    skip_space();
    if (peek() != c) fail(what);
    ++pos_;
  }

  PyValue parse_value(int depth) {
    skip_space();
    if (depth > 8) fail("a value nested at most 8 deep");
    const char c = peek();
    if (c == '\'' || c == '"') return parse_string();
    if (c == '(' || c == '[') return parse_sequence(depth);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_int();
    for (const auto& [word, flag] : {std::pair{std::string_view("True"), true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        PyValue v;
        v.kind = PyValue::Kind::kBool;
        v.flag = flag;
        return v;
      }
    }
    fail("a string, True/False, an integer or a tuple");
  }

  PyValue parse_string() {
    const char quote = text_[pos_++];
    PyValue v;
    v.kind = PyValue::Kind::kString;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') {
        if (++pos_ >= text_.size()) break;
      }
      v.text += text_[pos_++];
    }
    if (pos_ >= text_.size()) fail(fmt::format("the closing {} of a string", quote));
    ++pos_;
    return v;
  }

  PyValue parse_int() {
    const size_t start = pos_;
    if (peek() == '-') ++pos_;
    int64_t n = 0;
    bool any = false;
    while (peek() >= '0' && peek() <= '9') {
      const int d = peek() - '0';
      if (n > (std::numeric_limits<int64_t>::max() - d) / 10) {
        pos_ = start;
        fail("an integer below 2^63");
      }
      n = n * 10 + d;
      any = true;
      ++pos_;
    }
    if (!any) fail("digits");
    if (peek() == 'L') ++pos_;  // Python 2's long literal, in old 1.0/2.0 headers
    PyValue v;
    v.kind = PyValue::Kind::kInt;
    v.number = text_[start] == '-' ? -n : n;
    return v;
  }

  PyValue parse_sequence(int depth) {
    const char close = text_[pos_++] == '(' ? ')' : ']';
    PyValue v;
    v.kind = close == ')' ? PyValue::Kind::kTuple : PyValue::Kind::kList;
    while (true) {
      skip_space();
      if (peek() == close) break;
      v.items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != close) fail(fmt::format("',' or '{}' in a sequence", close));
    }
    ++pos_;
    return v;
  }

  std::string_view text_;
  int64_t base_;
  const std::string& name_;
  size_t pos_ = 0;
};

[[noreturn]] void corrupt(const std::string& name, const std::string& message, const std::string& hint = {}) {
  throw Error(ErrorCode::kParseError, fmt::format("{}: {}", name, message),
              hint.empty() ? "the file is truncated, corrupt or not a .npy file (numpy.save writes them)" : hint);
}

/// The DType of a 'descr' string, and whether its data is big-endian.
std::pair<DType, bool> parse_descr(const PyValue& value, const std::string& name) {
  const std::string supported = "|b1, |i1, |u1, <i4, <u4, <i8, <u8, <f2, <f4, <f8 (or big-endian '>')";
  if (value.kind == PyValue::Kind::kList) {
    throw Error(ErrorCode::kUnimplemented, fmt::format("{}: structured dtypes (record arrays) are not supported", name),
                "save each field as its own array; ingot reads " + supported);
  }
  if (value.kind != PyValue::Kind::kString) corrupt(name, "the header's 'descr' is not a dtype string");
  const std::string& d = value.text;
  const char order = d.empty() ? '\0' : d[0];
  const std::string_view code = order == '<' || order == '>' || order == '|' || order == '='
                                    ? std::string_view(d).substr(1)
                                    : std::string_view(d);
  for (const DescrCode& c : kDescrCodes) {
    if (code != c.code) continue;
    const bool one_byte = dtype_size(c.dtype) == 1;
    if (order == '|' && !one_byte) corrupt(name, fmt::format("dtype '{}' of several bytes has no byte order", d));
    return {c.dtype, !one_byte && order == '>'};
  }
  if (code.size() >= 1 && code[0] == 'O') {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("{}: dtype '{}' is an object array; object arrays hold Python pickles, which ingot never "
                            "loads",
                            name, d),
                "convert it to a numeric array (e.g. a.astype(np.float32)) and save it again");
  }
  throw Error(ErrorCode::kUnimplemented, fmt::format("{}: dtype '{}' is not supported", name, quote_bytes(d, 40)),
              "convert the array to a supported dtype before saving; ingot reads " + supported);
}

Shape parse_shape(const PyValue& value, const std::string& name) {
  if (value.kind != PyValue::Kind::kTuple) corrupt(name, "the header's 'shape' is not a tuple of integers");
  Shape shape;
  int64_t elements = 1;
  for (const PyValue& item : value.items) {
    if (item.kind != PyValue::Kind::kInt || item.number < 0) {
      corrupt(name, fmt::format("the header's 'shape' has {} where a dimension >= 0 belongs",
                                item.kind == PyValue::Kind::kInt ? std::to_string(item.number) : "a non-integer"));
    }
    shape.push_back(item.number);
    if (item.number != 0 && elements > kMaxElements / item.number) {
      corrupt(name, fmt::format("the header's shape has more than {} elements", kMaxElements));
    }
    elements *= item.number;
  }
  return shape;
}

void fill_header(NpyHeader& h, const std::vector<std::pair<std::string, PyValue>>& dict, const HeaderParser& parser,
                 const std::string& name) {
  bool seen[3] = {false, false, false};
  for (const auto& [key, value] : dict) {
    const int which = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
    if (which < 0) corrupt(name, fmt::format("the header has the unknown key '{}'", quote_bytes(key, 40)));
    if (seen[which]) corrupt(name, fmt::format("the header has the key '{}' twice", key));
    seen[which] = true;
    if (which == 0) std::tie(h.dtype, h.big_endian) = parse_descr(value, name);
    if (which == 1) {
      if (value.kind != PyValue::Kind::kBool) corrupt(name, "the header's 'fortran_order' is not True or False");
      h.fortran_order = value.flag;
    }
    if (which == 2) h.shape = parse_shape(value, name);
  }
  for (int i = 0; i < 3; ++i) {
    if (!seen[i]) {
      (void)parser;
      corrupt(name, fmt::format("the header has no '{}' key", i == 0 ? "descr" : i == 1 ? "fortran_order" : "shape"));
    }
  }
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += n;
  }
  return true;
}

uint32_t read_le(const std::byte* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

NpyHeader parse_npy_header(std::span<const std::byte> bytes, const std::string& name) {
  const auto size = static_cast<int64_t>(bytes.size());
  if (size < kMagicBytes + 2 || std::memcmp(bytes.data(), kMagic, kMagicBytes) != 0) {
    const std::string_view head(reinterpret_cast<const char*>(bytes.data()),
                                static_cast<size_t>(std::min<int64_t>(size, kMagicBytes)));
    corrupt(name, size < kMagicBytes
                      ? fmt::format("the file has {} bytes, fewer than the .npy magic string", size)
                      : fmt::format("bytes 0-5 are '{}', not the .npy magic string '\\x93NUMPY'", quote_bytes(head)));
  }
  const int major = static_cast<int>(bytes[6]), minor = static_cast<int>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    throw Error(ErrorCode::kParseError,
                fmt::format("{}: .npy format version {}.{} at byte 6 is not supported (1.0, 2.0 and 3.0 are)", name,
                            major, minor),
                "re-save the array with numpy.save");
  }
  const int len_bytes = major == 1 ? 2 : 4;
  if (size < 8 + len_bytes) corrupt(name, fmt::format("the file ends at byte {}, inside the header length", size));
  const int64_t hlen = read_le(bytes.data() + 8, len_bytes);
  NpyHeader h;
  h.data_offset = 8 + len_bytes + hlen;
  if (h.data_offset > size) {
    corrupt(name, fmt::format("the header length {} at byte 8 runs past the end of the {}-byte file", hlen, size));
  }
  std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8 + len_bytes, static_cast<size_t>(hlen));
  if (major == 3 && !valid_utf8(text)) corrupt(name, "the format 3.0 header is not valid UTF-8");
  HeaderParser parser(text, 8 + len_bytes, name);
  fill_header(h, parser.parse_dict(), parser, name);
  int64_t elements = 1;
  for (const int64_t d : h.shape) elements *= d;
  h.data_bytes = elements * dtype_size(h.dtype);
  const int64_t have = size - h.data_offset;
  if (have != h.data_bytes) {
    corrupt(name, fmt::format("shape {} of {} needs {} data bytes after the header (byte {}), the file has {}{}",
                              shape_to_string(h.shape), dtype_name(h.dtype), h.data_bytes, h.data_offset, have,
                              have < h.data_bytes ? " (truncated)" : ""));
  }
  return h;
}

void copy_elements(const std::byte* src, int64_t count, DType dtype, bool swap, std::byte* dst, const std::string& name,
                   int64_t offset) {
  const int64_t size = dtype_size(dtype);
  if (dtype == DType::kBool) {
    for (int64_t i = 0; i < count; ++i) {
      const auto b = static_cast<uint8_t>(src[i]);
      if (b > 1) {
        corrupt(name, fmt::format("the bool element at byte {} is {}, not 0 or 1", offset + i, b));
      }
    }
  }
  if (!swap || size == 1) {
    if (count > 0) std::memcpy(dst, src, static_cast<size_t>(count * size));
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t k = 0; k < size; ++k) dst[i * size + k] = src[i * size + size - 1 - k];
  }
}

std::string encode_npy_header(const Array& a, const std::string& context) {
  std::string_view descr;
  try {
    descr = npy_descr(a.dtype());
  } catch (const Error& e) {
    throw Error(e.code(), context + ": " + e.message(), e.hint());
  }
  const Shape& s = a.shape();
  std::string shape = "(";
  for (size_t i = 0; i < s.size(); ++i) shape += fmt::format("{}{}", i ? ", " : "", s[i]);
  shape += s.size() == 1 ? ",)" : ")";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  // NumPy's spare space for growing the first axis in place (GROWTH_AXIS_MAX_DIGITS = 21).
  if (!s.empty()) dict.append(static_cast<size_t>(21 - std::to_string(s[0]).size()), ' ');
  const int64_t hlen = static_cast<int64_t>(dict.size()) + 1;
  const bool v2 = 10 + hlen + 64 > 65535;
  const int64_t prefix = v2 ? 12 : 10;
  const int64_t pad = 64 - (prefix + hlen) % 64;  // NumPy pads a full 64 when already aligned
  const int64_t total_hlen = hlen + pad;
  std::string out(kMagic, kMagicBytes);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  for (int i = 0; i < (v2 ? 4 : 2); ++i) out += static_cast<char>((total_hlen >> (8 * i)) & 0xff);
  out += dict;
  out.append(static_cast<size_t>(pad), ' ');
  out += '\n';
  return out;
}

void encode_npy_data(const Array& a, const std::function<void(const void*, int64_t)>& sink) {
  if (a.dtype() != DType::kBool) {
    sink(a.raw_data(), a.nbytes());
    return;
  }
  const auto* p = static_cast<const uint8_t*>(a.raw_data());
  std::vector<uint8_t> chunk;
  for (int64_t i = 0; i < a.nbytes(); i += 1 << 20) {
    const int64_t end = std::min<int64_t>(a.nbytes(), i + (1 << 20));
    chunk.assign(p + i, p + end);
    for (uint8_t& b : chunk) b = b != 0 ? 1 : 0;
    sink(chunk.data(), static_cast<int64_t>(chunk.size()));
  }
}

MappedFile::MappedFile(const std::string& path, const std::string& owner) {
  auto fail = [&](const char* what, int err) {
    return Error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                 fmt::format("{}: {} '{}' failed: {}", owner, what, path, std::strerror(err)),
                 "check that the path names an existing, readable file");
  };
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) throw fail("opening", errno);
  if (!S_ISREG(st.st_mode)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: '{}' is not a regular file", owner, path),
                "pass the path of a file (not a directory, FIFO or device)");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw fail("opening", errno);
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    throw fail("inspecting", err == 0 ? EINVAL : err);
  }
  size_ = static_cast<int64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw fail("mapping", err);
    data_ = static_cast<const std::byte*>(p);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), static_cast<size_t>(size_));
}

void rethrow_as_ingot_error(const std::string& context) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kOutOfMemory, context + ": out of memory", "free memory or read the data in batches");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInternal, fmt::format("{}: {}", context, e.what()));
  } catch (...) {
    throw Error(ErrorCode::kInternal, context + ": unknown exception");
  }
}

std::string quote_bytes(std::string_view text, size_t max) {
  std::string out;
  for (const char c : text.substr(0, max)) {
    const auto b = static_cast<unsigned char>(c);
    out += b >= 0x20 && b < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", b);
  }
  if (text.size() > max) out += "...";
  return out;
}

}  // namespace ingot::detail
