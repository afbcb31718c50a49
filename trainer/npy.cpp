// .npy files to and from Arrays (include/ingot/trainer/npy.h); the format's pieces are in
// npy_format.cpp, .npz archives in npz.cpp, memory-mapped reading in npy_mapped.cpp.
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "ingot/runtime/error.h"
#include "ingot/trainer/npy.h"
#include "ingot/trainer/output_file.h"
#include "npy_format.h"

namespace ingot {

namespace {

/// Copies Fortran-order (column-major) elements `src` of `shape` into row-major `dst`,
/// byte-swapping when `swap`.
void fortran_to_c(const std::byte* src, const Shape& shape, DType dtype, bool swap, std::byte* dst,
                  const std::string& name, int64_t offset) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t size = dtype_size(dtype);
  int64_t count = 1;
  for (const int64_t d : shape) count *= d;
  if (count == 0) return;
  // Element (i_0, ..., i_{r-1}) is at Fortran position sum_k i_k * stride_k, stride_0 = 1.
  std::vector<int64_t> stride(static_cast<size_t>(rank), 1), index(static_cast<size_t>(rank), 0);
  for (int64_t k = 1; k < rank; ++k) stride[k] = stride[k - 1] * shape[k - 1];
  int64_t pos = 0;  // Fortran position of `index`
  for (int64_t c = 0; c < count; ++c) {
    detail::copy_elements(src + pos * size, 1, dtype, swap, dst + c * size, name, offset + pos * size);
    for (int64_t k = rank - 1; k >= 0; --k) {  // next row-major index
      if (++index[k] < shape[k]) {
        pos += stride[k];
        break;
      }
      pos -= (shape[k] - 1) * stride[k];
      index[k] = 0;
    }
  }
}

Array host_array_for(const Array& a, const char* context) {
  if (!a.valid() || a.donated()) {
    throw Error(
        ErrorCode::kFailedPrecondition,
        fmt::format("{}: the array is {}", context, a.valid() ? "donated (its buffer was given to a step)" : "invalid"),
        "pass a valid array that was not donated");
  }
  return to_host(a);
}

}  // namespace

std::string_view npy_descr(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "|b1";
    case DType::kI8:
      return "|i1";
    case DType::kU8:
      return "|u1";
    case DType::kI32:
      return "<i4";
    case DType::kU32:
      return "<u4";
    case DType::kI64:
      return "<i8";
    case DType::kU64:
      return "<u8";
    case DType::kF16:
      return "<f2";
    case DType::kF32:
      return "<f4";
    case DType::kF64:
      return "<f8";
    case DType::kBF16:
      break;
  }
  throw Error(ErrorCode::kInvalidArgument, "bfloat16 arrays have no NumPy dtype and cannot be saved as .npy",
              "convert the array to float32 first (exact), or save it with save_safetensors");
}

Array parse_npy(std::span<const std::byte> bytes, const std::string& name_for_errors) {
  return detail::guard_std_exceptions("parse_npy(" + name_for_errors + ")", [&] {
    const detail::NpyHeader h = detail::parse_npy_header(bytes, name_for_errors);
    Array out = Array::empty(h.shape, h.dtype);
    const std::byte* src = bytes.data() + h.data_offset;
    auto* dst = static_cast<std::byte*>(out.raw_data());
    if (h.fortran_order && h.shape.size() > 1) {
      fortran_to_c(src, h.shape, h.dtype, h.big_endian, dst, name_for_errors, h.data_offset);
    } else {
      detail::copy_elements(src, out.size(), h.dtype, h.big_endian, dst, name_for_errors, h.data_offset);
    }
    return out;
  });
}

Array load_npy(const std::string& path) {
  return detail::guard_std_exceptions("load_npy('" + path + "')", [&] {
    const detail::MappedFile file(path, "load_npy");
    return parse_npy(file.bytes(), "'" + path + "'");
  });
}

void save_npy(const std::string& path, const Array& a) {
  detail::guard_std_exceptions("save_npy('" + path + "')", [&] {
    const Array host = host_array_for(a, "save_npy");
    const std::string header = detail::encode_npy_header(host, fmt::format("save_npy('{}')", path));
    OutputFile file(path, "save_npy");
    file.write(header);
    detail::encode_npy_data(host, [&](const void* p, int64_t n) { file.write(p, n); });
    file.commit();
  });
}

namespace detail {

Array npy_host_array(const Array& a, const char* context) { return host_array_for(a, context); }

}  // namespace detail

}  // namespace ingot
