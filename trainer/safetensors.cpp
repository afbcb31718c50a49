// Weights I/O in the safetensors format: see include/ingot/trainer/safetensors.h for the layout.
// The writer reproduces the reference implementation's byte layout (huggingface/safetensors,
// safetensors/src/tensor.rs: `prepare` and `Serialize for Metadata`); the reader applies the
// reference's checks (`read_metadata` and `Metadata::validate`) with ingot's error messages.
#include "ingot/trainer/safetensors.h"
#include "ingot/runtime/text_scan.h"
#include "ingot/trainer/output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

namespace ingot {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; ingot arrays are stored in host order");

using Json = nlohmann::json;

// --- dtypes --------------------------------------------------------------------------------

struct DTypeEntry {
  DType dtype;
  std::string_view name;
  int rank;  // position in the reference's Dtype enum (ascending alignment); writer sorts by it
};

constexpr DTypeEntry kDTypes[] = {
    {DType::kBool, "BOOL", 0}, {DType::kU8, "U8", 1},    {DType::kI8, "I8", 2},    {DType::kF16, "F16", 7},
    {DType::kBF16, "BF16", 8}, {DType::kI32, "I32", 9},  {DType::kU32, "U32", 10}, {DType::kF32, "F32", 11},
    {DType::kF64, "F64", 12},  {DType::kI64, "I64", 13}, {DType::kU64, "U64", 14},
};

const DTypeEntry& dtype_entry(DType dtype) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.dtype == dtype) return e;
  }
  throw Error(ErrorCode::kInternal, fmt::format("safetensors: no entry for dtype {}", static_cast<int>(dtype)));
}

std::string supported_dtype_list() {
  std::string out;
  for (const DTypeEntry& e : kDTypes) out += (out.empty() ? "" : ", ") + std::string(e.name);
  return out;
}

// --- files ---------------------------------------------------------------------------------

std::string system_reason(int err) { return std::strerror(err); }

/// ingot::Error for a failed file-system call `what` on `path` with errno `err`.
Error file_error(const std::string& context, const std::string& what, const std::string& path, int err) {
  return Error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
               fmt::format("{}: {} '{}' failed: {}", context, what, path, system_reason(err)),
               "check that the path and its directory exist and are accessible");
}

/// An owned POSIX file descriptor (closed on destruction).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

/// Reads exactly `size` bytes at `offset` of `fd` into `dst`; returns 0, errno, or -1 at an
/// early end of file.
int read_all(int fd, int64_t offset, void* dst, int64_t size) {
  auto* p = static_cast<char*>(dst);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, static_cast<size_t>(std::min<int64_t>(size, 1 << 30)), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return -1;
    p += n;
    offset += n;
    size -= n;
  }
  return 0;
}

/// `text` with every byte outside printable ASCII written as \xNN (for messages quoting bytes
/// that may not be UTF-8).
std::string escape_bytes(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    out += b >= 0x20 && b < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", b);
  }
  return out;
}

// --- writing -------------------------------------------------------------------------------

/// `text` as a JSON string literal (compact, UTF-8 kept, control characters escaped as the
/// reference's serde_json does). Throws kInvalidArgument naming `what` if `text` is not UTF-8.
std::string json_string(const std::string& text, const std::string& what) {
  try {
    return Json(text).dump();
  } catch (const Json::exception&) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("save_safetensors: {} is not valid UTF-8", what),
                "safetensors headers are UTF-8 JSON; use UTF-8 names and metadata");
  }
}

/// Validates names and arrays; returns the indices of `tensors` in the reference's file order.
std::vector<size_t> write_order(const std::vector<std::pair<std::string, Array>>& tensors) {
  std::set<std::string> seen;
  for (const auto& [name, array] : tensors) {
    if (name.empty()) {
      throw Error(ErrorCode::kInvalidArgument, "save_safetensors: a tensor name is empty",
                  "give every tensor a non-empty, unique name");
    }
    if (name == "__metadata__") {
      throw Error(ErrorCode::kInvalidArgument,
                  "save_safetensors: the tensor name '__metadata__' is reserved for the header's "
                  "metadata",
                  "rename the tensor");
    }
    if (!seen.insert(name).second) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("save_safetensors: the tensor name '{}' is used twice", name),
                  "give every tensor a unique name");
    }
    if (!array.valid() || array.donated()) {
      throw Error(ErrorCode::kFailedPrecondition,
                  fmt::format("save_safetensors: tensor '{}' is {}", name,
                              array.valid() ? "a donated array" : "an invalid array"),
                  "save arrays that hold data (not donated, not default-constructed)");
    }
  }
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int ra = dtype_entry(tensors[a].second.dtype()).rank;
    const int rb = dtype_entry(tensors[b].second.dtype()).rank;
    if (ra != rb) return ra > rb;
    return tensors[a].first < tensors[b].first;
  });
  return order;
}

std::string metadata_json(const std::map<std::string, std::string>& metadata) {
  std::string out = "{";
  for (const auto& [key, value] : metadata) {
    if (out.size() > 1) out += ',';
    out += json_string(key, fmt::format("metadata key '{}'", escape_bytes(key))) + ':' +
           json_string(value, fmt::format("the value of metadata key '{}'", escape_bytes(key)));
  }
  return out + '}';
}

std::string tensor_json(const Array& array, int64_t begin) {
  std::string shape;
  for (int64_t d : array.shape()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  return fmt::format(R"({{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", dtype_entry(array.dtype()).name, shape,
                     begin, begin + array.nbytes());
}

/// The padded header for `tensors` written in `order`.
std::string header_json(const std::vector<std::pair<std::string, Array>>& tensors, const std::vector<size_t>& order,
                        const std::map<std::string, std::string>& metadata) {
  std::string out = "{";
  if (!metadata.empty()) out += "\"__metadata__\":" + metadata_json(metadata);
  int64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, array] = tensors[i];
    if (out.size() > 1) out += ',';
    out += json_string(name, fmt::format("tensor name '{}'", escape_bytes(name))) + ':' + tensor_json(array, offset);
    offset += array.nbytes();
  }
  out += '}';
  out.append((8 - out.size() % 8) % 8, ' ');
  return out;
}

void write_tensor_data(OutputFile& file, const Array& array) {
  if (array.nbytes() == 0) return;
  const Array host = to_host(array);
  if (host.dtype() == DType::kBool) {
    const auto* p = static_cast<const uint8_t*>(host.raw_data());
    std::vector<uint8_t> bytes(p, p + host.nbytes());
    for (uint8_t& b : bytes) b = b != 0 ? 1 : 0;
    file.write(bytes.data(), static_cast<int64_t>(bytes.size()));
  } else {
    file.write(host.raw_data(), host.nbytes());
  }
}

// --- reading -------------------------------------------------------------------------------

/// One header entry.
struct Entry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct Header {
  std::vector<Entry> entries;  // sorted by (begin, end)
  std::map<std::string, std::string> metadata;
};

/// Reads a safetensors file: `path`, its descriptor and size, and error construction.
class Reader {
 public:
  // O_NONBLOCK: opening a FIFO does not wait for a writer (it is refused below as not a regular
  // file); reads of regular files ignore the flag.
  explicit Reader(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {
    if (fd_.get() < 0) throw file_error("load_safetensors", "opening", path, errno);
    struct stat st{};
    if (::fstat(fd_.get(), &st) != 0) {
      throw file_error("load_safetensors", "inspecting", path, errno);
    }
    if (!S_ISREG(st.st_mode)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("load_safetensors: '{}' is not a regular file", path),
                  "pass the path of a .safetensors file");
    }
    file_size_ = static_cast<int64_t>(st.st_size);
  }

  SafetensorsFile read() {
    const int64_t header_size = read_header_size();
    Header header = parse(read_text(8, header_size), file_size_ - 8 - header_size);
    SafetensorsFile out;
    out.path = path_;
    out.metadata = std::move(header.metadata);
    for (const Entry& e : header.entries) {
      out.tensors.emplace_back(e.name, read_tensor(e, 8 + header_size));
    }
    return out;
  }

 private:
  [[noreturn]] void corrupt(const std::string& message, const std::string& hint = {}) const {
    throw Error(ErrorCode::kParseError, fmt::format("load_safetensors('{}'): {}", path_, message),
                hint.empty() ? "the file is corrupt, truncated or not a safetensors file" : hint);
  }

  void read_bytes(int64_t offset, void* dst, int64_t size, const std::string& what) const {
    const int err = read_all(fd_.get(), offset, dst, size);
    if (err == -1) {
      corrupt(fmt::format("the file ended while reading {} ({} bytes at offset {})", what, size, offset));
    }
    if (err != 0) throw file_error("load_safetensors", "reading " + what + " of", path_, err);
  }

  int64_t read_header_size() const {
    if (file_size_ < 8) {
      corrupt(fmt::format("the file has {} bytes, fewer than the 8-byte header length", file_size_));
    }
    uint8_t bytes[8];
    read_bytes(0, bytes, 8, "the header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
    if (n > static_cast<uint64_t>(kMaxSafetensorsHeaderBytes)) {
      corrupt(fmt::format("the header length {} exceeds the limit of {} bytes", n, kMaxSafetensorsHeaderBytes));
    }
    if (n > static_cast<uint64_t>(file_size_ - 8)) {
      corrupt(
          fmt::format("the header length {} exceeds the {} bytes after the length field "
                      "(file size {})",
                      n, file_size_ - 8, file_size_));
    }
    return static_cast<int64_t>(n);
  }

  std::string read_text(int64_t offset, int64_t size) const {
    std::string text(static_cast<size_t>(size), '\0');
    read_bytes(offset, text.data(), size, "the header");
    return text;
  }

  Json parse_json(const std::string& text) const;
  DType parse_dtype(const std::string& name, const Json& value) const;
  Entry parse_entry(const std::string& name, const Json& value) const;
  Shape parse_shape(const std::string& name, const Json& value) const;
  std::map<std::string, std::string> parse_metadata(const Json& value) const;
  Header parse(const std::string& text, int64_t data_size) const;
  void check_layout(const std::vector<Entry>& entries, int64_t data_size) const;
  Array read_tensor(const Entry& e, int64_t data_start) const;

  std::string path_;
  Fd fd_;
  int64_t file_size_ = 0;
};

Json Reader::parse_json(const std::string& text) const {
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  // nlohmann::json stops at a NUL byte as if the input ended there; raw NULs are never valid JSON.
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    corrupt(fmt::format("the header is not valid JSON: it has a NUL byte at header offset {}", nul));
  }
  // A header nested deeper than any safetensors file needs is refused before nlohmann::json
  // builds it (deep nesting exhausted the stack in its recursive destructor and dumps).
  if (const int64_t depth = detail::bracket_depth(text, kMaxSafetensorsJsonDepth + 1, false);
      depth > kMaxSafetensorsJsonDepth) {
    corrupt(fmt::format("the header nests JSON arrays and objects more than {} levels deep", kMaxSafetensorsJsonDepth),
            "a safetensors header is an object of tensor entries (3 levels); the file is corrupt or hostile");
  }
  Json header;
  try {
    header = Json::parse(text, on_event);
  } catch (const Json::exception& e) {
    corrupt(fmt::format("the header is not valid JSON: {}", escape_bytes(e.what())));
  }
  if (!header.is_object()) {
    corrupt(fmt::format("the header is a JSON {}, not an object", header.type_name()));
  }
  if (!duplicate.empty()) corrupt(fmt::format("the header names '{}' twice", duplicate));
  return header;
}

Shape Reader::parse_shape(const std::string& name, const Json& value) const {
  if (!value.is_array()) {
    corrupt(fmt::format("tensor '{}': \"shape\" is {}, not an array of sizes", name, value.dump()));
  }
  Shape shape;
  int64_t count = 1;
  for (const Json& d : value) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(kMaxElements)) {
      corrupt(fmt::format("tensor '{}': shape {} has the size {}; sizes are integers in [0, {}]", name, value.dump(),
                          d.dump(), kMaxElements));
    }
    const auto size = static_cast<int64_t>(d.get<uint64_t>());
    if (size > 0 && count > kMaxElements / size) {
      corrupt(fmt::format("tensor '{}': shape {} has more than {} elements", name, value.dump(), kMaxElements));
    }
    count *= size;
    shape.push_back(size);
  }
  return shape;
}

constexpr const char* kEntryHint = R"(each tensor is {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]})";

DType Reader::parse_dtype(const std::string& name, const Json& value) const {
  if (!value.is_string()) {
    corrupt(fmt::format("tensor '{}': \"dtype\" is {}, not a string", name, value.dump()), kEntryHint);
  }
  try {
    return parse_safetensors_dtype(value.get<std::string>());
  } catch (const Error&) {
    corrupt(fmt::format("tensor '{}' has the dtype {}, which ingot does not support", name, value.dump()),
            fmt::format("supported dtypes: {}", supported_dtype_list()));
  }
}

Entry Reader::parse_entry(const std::string& name, const Json& value) const {
  if (!value.is_object()) {
    corrupt(fmt::format("tensor '{}' is {}, not an object", name, value.dump()), kEntryHint);
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) {
      corrupt(fmt::format("tensor '{}' has no \"{}\"", name, key), kEntryHint);
    }
  }
  Entry e;
  e.name = name;
  e.dtype = parse_dtype(name, value.at("dtype"));
  e.shape = parse_shape(name, value.at("shape"));
  const Json& offsets = value.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    corrupt(fmt::format("tensor '{}': \"data_offsets\" is {}, not [begin, end] with integers "
                        ">= 0",
                        name, offsets.dump()),
            kEntryHint);
  }
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  return e;
}

std::map<std::string, std::string> Reader::parse_metadata(const Json& value) const {
  if (!value.is_object()) {
    corrupt(fmt::format("\"__metadata__\" is {}, not an object of strings", value.dump()));
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      corrupt(fmt::format("\"__metadata__\" entry '{}' is {}, not a string", key, v.dump()));
    }
    out[key] = v.get<std::string>();
  }
  return out;
}

Header Reader::parse(const std::string& text, int64_t data_size) const {
  const Json json = parse_json(text);
  Header h;
  for (const auto& [key, value] : json.items()) {
    if (key == "__metadata__") {
      h.metadata = parse_metadata(value);
    } else {
      h.entries.push_back(parse_entry(key, value));
    }
  }
  std::stable_sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  check_layout(h.entries, data_size);
  return h;
}

void Reader::check_layout(const std::vector<Entry>& entries, int64_t data_size) const {
  uint64_t previous_end = 0;
  std::string previous = "the start of the data section";
  for (const Entry& e : entries) {
    const auto nbytes = static_cast<uint64_t>(num_elements(e.shape) * dtype_size(e.dtype));
    const std::string where = fmt::format("tensor '{}' (dtype {}, shape {}, data_offsets [{}, {}])", e.name,
                                          safetensors_dtype_name(e.dtype), shape_to_string(e.shape), e.begin, e.end);
    if (e.end < e.begin) corrupt(where + ": the end offset is before the begin offset");
    if (e.end - e.begin != nbytes) {
      corrupt(
          fmt::format("{}: the offsets span {} bytes but the shape and dtype need {}", where, e.end - e.begin, nbytes));
    }
    if (e.end > static_cast<uint64_t>(data_size)) {
      corrupt(
          fmt::format("{}: the data ends past the end of the file (the data section has {} "
                      "bytes); the file is truncated or the offsets are wrong",
                      where, data_size));
    }
    if (e.begin < previous_end) {
      corrupt(fmt::format("{}: its data overlaps {}, which ends at {}", where, previous, previous_end));
    }
    if (e.begin > previous_end) {
      corrupt(fmt::format("{}: there is a gap of {} bytes after {} (data must be contiguous)", where,
                          e.begin - previous_end, previous));
    }
    previous_end = e.end;
    previous = fmt::format("tensor '{}'", e.name);
  }
  if (previous_end != static_cast<uint64_t>(data_size)) {
    corrupt(
        fmt::format("the data section has {} bytes but the tensors cover only {}: {} "
                    "trailing bytes",
                    data_size, previous_end, static_cast<uint64_t>(data_size) - previous_end));
  }
}

Array Reader::read_tensor(const Entry& e, int64_t data_start) const {
  Array a = Array::empty(e.shape, e.dtype);
  const int64_t nbytes = a.nbytes();
  if (nbytes == 0) return a;
  read_bytes(data_start + static_cast<int64_t>(e.begin), a.raw_data(), nbytes, fmt::format("tensor '{}'", e.name));
  if (e.dtype == DType::kBool) {
    const auto* p = static_cast<const uint8_t*>(a.raw_data());
    for (int64_t i = 0; i < nbytes; ++i) {
      if (p[i] > 1) {
        corrupt(
            fmt::format("tensor '{}' (BOOL) holds the byte {} at element {}; BOOL elements "
                        "are 0 or 1",
                        e.name, p[i], i));
      }
    }
  }
  return a;
}

// --- load_into -----------------------------------------------------------------------------

std::string names_list(const SafetensorsFile& file) {
  std::string out;
  const size_t shown = std::min<size_t>(file.tensors.size(), 20);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + ("'" + file.tensors[i].first + "'");
  if (file.tensors.size() > shown) out += fmt::format(", ... ({} in all)", file.tensors.size());
  return out.empty() ? "none" : out;
}

/// Checks one target against the file; returns the file's array for it.
const Array& check_target(const SafetensorsFile& file, const std::string& name, const Array* target) {
  if (target == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("load_into: the target for '{}' is a null pointer", name),
                "pass a pointer to the array to overwrite");
  }
  if (!target->valid()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("load_into: variable '{}' is an invalid (default-constructed) array", name),
                "build the model's variables before loading weights");
  }
  const Array* source = file.find(name);
  if (source == nullptr) {
    throw Error(
        ErrorCode::kNotFound,
        fmt::format("load_into: variable '{}' is not in '{}' (its tensors: {})", name, file.path, names_list(file)),
        "load a file saved from the same model");
  }
  if (source->shape() != target->shape() || source->dtype() != target->dtype()) {
    throw Error(source->shape() != target->shape() ? ErrorCode::kShapeMismatch : ErrorCode::kDTypeMismatch,
                fmt::format("load_into: variable '{}' has shape {} and dtype {}, but '{}' holds "
                            "shape {} and dtype {} for it",
                            name, shape_to_string(target->shape()), dtype_name(target->dtype()), file.path,
                            shape_to_string(source->shape()), dtype_name(source->dtype())),
                "load a file saved from a model with the same architecture and dtypes");
  }
  return *source;
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) { return dtype_entry(dtype).name; }

DType parse_safetensors_dtype(std::string_view name) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.name == name) return e.dtype;
  }
  throw Error(ErrorCode::kInvalidArgument, fmt::format("unsupported safetensors dtype '{}'", name),
              fmt::format("supported dtypes: {}", supported_dtype_list()));
}

const Array* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, a] : tensors) {
    if (n == name) return &a;
  }
  return nullptr;
}

const Array& SafetensorsFile::at(const std::string& name) const {
  if (const Array* a = find(name)) return *a;
  throw Error(
      ErrorCode::kNotFound,
      fmt::format("SafetensorsFile::at: no tensor '{}' in '{}' (its tensors: {})", name, path, names_list(*this)),
      "use names() to list the tensors");
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [n, a] : tensors) out.push_back(n);
  return out;
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Array>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  header_json(tensors, write_order(tensors), metadata);  // bad names are refused before a file exists
  OutputFile file(path, "save_safetensors");
  save_safetensors(file, tensors, metadata);
  file.commit();
}

void save_safetensors(OutputFile& file, const std::vector<std::pair<std::string, Array>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::vector<size_t> order = write_order(tensors);
  const std::string header = header_json(tensors, order, metadata);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i));
  file.write(length, 8);
  file.write(header.data(), static_cast<int64_t>(header.size()));
  for (size_t i : order) {
    try {
      write_tensor_data(file, tensors[i].second);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("save_safetensors: tensor '{}'", tensors[i].first));
    }
  }
}

SafetensorsFile load_safetensors(const std::string& path) { return Reader(path).read(); }

void load_into(const SafetensorsFile& file, std::vector<std::pair<std::string, Array*>> targets) {
  std::set<std::string> seen;
  std::vector<const Array*> sources;
  for (const auto& [name, target] : targets) {
    if (!seen.insert(name).second) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("load_into: the variable name '{}' is given twice", name),
                  "give every target a unique name");
    }
    sources.push_back(&check_target(file, name, target));
  }
  // Copies (and placements) first, assignments last: an error leaves every target unchanged.
  std::vector<Array> values;
  for (size_t i = 0; i < targets.size(); ++i) {
    const Array& source = *sources[i];
    const NamedSharding sharding = targets[i].second->sharding();
    values.push_back(source.sharding() == sharding ? source.clone() : device_put(source, sharding));
  }
  for (size_t i = 0; i < targets.size(); ++i) *targets[i].second = std::move(values[i]);
}

}  // namespace ingot
