// The .npy format's pieces shared by load_npy/save_npy (npy.cpp), the .npz archives (npz.cpp) and
// the memory-mapped reader (npy_mapped.cpp), plus a read-only mapped file and the conversion of
// stray std:: exceptions; internal to trainer/ (public API: include/ingot/trainer/npy.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "ingot/runtime/array.h"

namespace ingot::detail {

/// A parsed .npy header: where the data is and how to read it.
struct NpyHeader {
  DType dtype = DType::kF32;
  Shape shape;
  bool fortran_order = false;
  bool big_endian = false;  ///< 'descr' says '>' for a dtype of more than one byte
  int64_t data_offset = 0;  ///< the first data byte
  int64_t data_bytes = 0;   ///< elements * itemsize (checked against the size of `bytes`)
};

/// Parses and checks the header of the .npy file in `bytes` (everything parse_npy checks except
/// the bool elements' values); errors name `name`.
NpyHeader parse_npy_header(std::span<const std::byte> bytes, const std::string& name);

/// Copies `count` elements of `dtype` from `src` to `dst` (non-overlapping), byte-swapping them
/// when `swap`; bool elements must be 0 or 1 (kParseError naming `name` and the byte offset
/// `offset` + the element's position).
void copy_elements(const std::byte* src, int64_t count, DType dtype, bool swap, std::byte* dst, const std::string& name,
                   int64_t offset);

/// The header (magic, version, length, padded dict) numpy.save writes for the host array `a`;
/// npy_descr's error for bf16, prefixed by `context`.
std::string encode_npy_header(const Array& a, const std::string& context);
/// The data section of the host array `a` as a .npy file holds it: its bytes (little-endian, C
/// order), bools as 0/1. `sink(const void*, int64_t)` receives them in one or more pieces.
void encode_npy_data(const Array& a, const std::function<void(const void*, int64_t)>& sink);

/// `a` as a host array (to_host), for writing; kFailedPrecondition naming `context` for an invalid
/// or donated array.
Array npy_host_array(const Array& a, const char* context);

/// A regular file mapped read-only into memory (or an empty span for an empty file). Errors
/// (ingot::Error naming `owner` and the path): kNotFound for no file, kInvalidArgument for one that
/// cannot be opened, is not a regular file, or cannot be mapped.
class MappedFile {
 public:
  MappedFile(const std::string& path, const std::string& owner);
  MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
  }
  MappedFile& operator=(MappedFile&&) = delete;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  std::span<const std::byte> bytes() const { return {data_, static_cast<size_t>(size_)}; }
  /// Gives up the mapping (the caller unmaps it with munmap(data, size)).
  std::pair<const std::byte*, int64_t> release() noexcept {
    auto out = std::make_pair(data_, size_);
    data_ = nullptr;
    size_ = 0;
    return out;
  }

 private:
  const std::byte* data_ = nullptr;
  int64_t size_ = 0;
};

/// Rethrows the exception being handled: an ingot::Error unchanged, std::bad_alloc as
/// ingot::Error(kOutOfMemory) and any other exception as kInternal, naming `context` (npy.cpp).
[[noreturn]] void rethrow_as_ingot_error(const std::string& context);

/// Runs `fn`, turning a std:: exception that escapes it (std::bad_alloc, a file-system error) into
/// an ingot::Error naming `context` (rethrow_as_ingot_error); ingot::Errors pass unchanged.
template <class F>
decltype(auto) guard_std_exceptions(const std::string& context, F&& fn) {
  try {
    return fn();
  } catch (...) {
    rethrow_as_ingot_error(context);
  }
}

/// `text` with bytes outside printable ASCII written as \xNN, cut to `max` bytes with "..." (for
/// quoting file contents in messages).
std::string quote_bytes(std::string_view text, size_t max = 80);

}  // namespace ingot::detail
