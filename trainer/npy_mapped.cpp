// Memory-mapped .npy files and the DataAdapter that streams batches out of them
// (include/ingot/trainer/npy.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ingot/runtime/error.h"
#include "ingot/trainer/npy.h"
#include "npy_format.h"
#include "rows.h"

namespace ingot {

MappedNpy MappedNpy::open(const std::string& path) {
  return detail::guard_std_exceptions("MappedNpy::open('" + path + "')", [&] {
    detail::MappedFile file(path, "MappedNpy::open");
    const detail::NpyHeader h = detail::parse_npy_header(file.bytes(), "'" + path + "'");
    if (h.shape.empty()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("MappedNpy::open: '{}' holds a 0-d array (no rows)", path),
                  "read it whole with load_npy");
    }
    if (h.fortran_order && h.shape.size() > 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("MappedNpy::open: '{}' is in Fortran order (shape {}); its rows are not contiguous", path,
                              shape_to_string(h.shape)),
                  "re-save it in C order (np.save(path, np.ascontiguousarray(a))) or read it whole with load_npy");
    }
    MappedNpy out;
    out.path_ = path;
    out.dtype_ = h.dtype;
    out.shape_ = h.shape;
    out.swap_ = h.big_endian;
    out.data_offset_ = h.data_offset;
    out.row_bytes_ = h.shape[0] == 0 ? 0 : h.data_bytes / h.shape[0];
    std::tie(out.map_, out.map_size_) = file.release();
    out.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    return out;
  });
}

MappedNpy::MappedNpy(MappedNpy&& other) noexcept { *this = std::move(other); }

MappedNpy& MappedNpy::operator=(MappedNpy&& other) noexcept {
  if (this == &other) return *this;
  release();
  path_ = std::move(other.path_);
  dtype_ = other.dtype_;
  shape_ = std::move(other.shape_);
  swap_ = other.swap_;
  map_ = std::exchange(other.map_, nullptr);
  map_size_ = std::exchange(other.map_size_, 0);
  fd_ = std::exchange(other.fd_, -1);
  data_offset_ = other.data_offset_;
  row_bytes_ = other.row_bytes_;
  return *this;
}

MappedNpy::~MappedNpy() { release(); }

void MappedNpy::release() noexcept {
  if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), static_cast<size_t>(map_size_));
  map_ = nullptr;
  map_size_ = 0;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Array MappedNpy::read_rows(std::span<const int64_t> indices) const {
  return detail::guard_std_exceptions("MappedNpy::read_rows('" + path_ + "')", [&] {
    Shape shape = shape_;
    shape[0] = static_cast<int64_t>(indices.size());
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] < 0 || indices[i] >= rows()) {
        throw Error(ErrorCode::kOutOfRange,
                    fmt::format("MappedNpy::read_rows: index {} (position {}) is outside [0, {}) for '{}'", indices[i],
                                i, rows(), path_),
                    "pass row numbers below the file's row count");
      }
    }
    struct stat st{};
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && static_cast<int64_t>(st.st_size) < map_size_) {
      throw Error(ErrorCode::kFailedPrecondition,
                  fmt::format("MappedNpy::read_rows: '{}' now has {} bytes, fewer than the {} it had when opened (it "
                              "was truncated or rewritten in place)",
                              path_, static_cast<int64_t>(st.st_size), map_size_),
                  "do not rewrite a data file while it is read; write the new one under another name and rename it");
    }
    Array out = Array::empty(shape, dtype_);
    auto* dst = static_cast<std::byte*>(out.raw_data());
    const int64_t per_row = row_bytes_ / dtype_size(dtype_);
    const std::string name = "'" + path_ + "'";
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t offset = data_offset_ + indices[i] * row_bytes_;
      detail::copy_elements(map_ + offset, per_row, dtype_, swap_, dst + static_cast<int64_t>(i) * row_bytes_, name,
                            offset);
    }
    return out;
  });
}

namespace {

std::vector<std::shared_ptr<const MappedNpy>> open_all(const std::vector<std::string>& paths) {
  std::vector<std::shared_ptr<const MappedNpy>> out;
  for (const std::string& p : paths) out.push_back(std::make_shared<const MappedNpy>(MappedNpy::open(p)));
  return out;
}

void check_rows(const std::vector<std::shared_ptr<const MappedNpy>>& files, const MappedNpy& first, const char* what) {
  for (const auto& f : files) {
    if (f->rows() != first.rows()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("npy_data_adapter: {} file '{}' has {} rows but x file '{}' has {}", what, f->path(),
                              f->rows(), first.path(), first.rows()),
                  "every file of a data set needs one row per sample");
    }
  }
}

void check_weights(const MappedNpy& f) {
  if (f.shape().size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("npy_data_adapter: sample_weight file '{}' has shape {}; it must be 1-D (samples,)",
                            f.path(), shape_to_string(f.shape())));
  }
  constexpr int64_t kChunk = 1 << 16;
  for (int64_t start = 0; start < f.rows(); start += kChunk) {
    const std::vector<int64_t> rows = detail::iota(start, std::min(f.rows(), start + kChunk));
    const std::vector<double> w = f.read_rows(rows).to_doubles();
    for (size_t j = 0; j < w.size(); ++j) {
      if (!std::isfinite(w[j])) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("npy_data_adapter: sample weight of row {} in '{}' is {}",
                                start + static_cast<int64_t>(j), f.path(), w[j]),
                    "sample weights must be finite (a NaN or infinite weight poisons every step's loss)");
      }
    }
  }
}

Arrays read_all(const std::vector<std::shared_ptr<const MappedNpy>>& files, std::span<const int64_t> rows) {
  std::vector<Array> out;
  for (const auto& f : files) out.push_back(f->read_rows(rows));
  return Arrays(std::move(out));
}

}  // namespace

NpyDataAdapter::NpyDataAdapter(NpyDataOptions options)
    : batch_size_(options.batch_size), shuffle_(options.shuffle), seed_(options.seed) {
  detail::guard_std_exceptions("npy_data_adapter", [&] {
    if (options.x.empty()) {
      throw Error(ErrorCode::kInvalidArgument, "npy_data_adapter: NpyDataOptions::x names no file",
                  "give one .npy file per model input");
    }
    if (batch_size_ <= 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("npy_data_adapter: batch_size must be > 0, got {}", batch_size_));
    }
    x_ = open_all(options.x);
    y_ = open_all(options.y);
    sw_ = open_all(options.sample_weight);
    const MappedNpy& first = *x_[0];
    if (first.rows() == 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("npy_data_adapter: x file '{}' has no rows", first.path()),
                  "pass at least one sample");
    }
    check_rows(x_, first, "x");
    check_rows(y_, first, "y");
    check_rows(sw_, first, "sample_weight");
    for (const auto& f : sw_) check_weights(*f);
  });
}

std::optional<int64_t> NpyDataAdapter::num_batches() const { return (num_samples() + batch_size_ - 1) / batch_size_; }

std::vector<ir::TensorType> NpyDataAdapter::x_types() const {
  std::vector<ir::TensorType> out;
  for (const auto& f : x_) {
    Shape s = f->shape();
    s[0] = std::min(batch_size_, s[0]);
    out.push_back({s, f->dtype()});
  }
  return out;
}

std::function<std::optional<Batch>()> NpyDataAdapter::epoch(int64_t epoch) {
  std::vector<int64_t> order = detail::epoch_order(num_samples(), shuffle_, seed_, epoch);  // as ArrayDataAdapter
  auto next = std::make_shared<int64_t>(0);
  return [this, order = std::move(order), next]() -> std::optional<Batch> {
    const int64_t n = num_samples();
    if (*next >= n) return std::nullopt;
    const int64_t end = std::min(n, *next + batch_size_);
    const std::span<const int64_t> rows(order.data() + *next, static_cast<size_t>(end - *next));
    *next = end;
    return Batch{read_all(x_, rows), read_all(y_, rows), read_all(sw_, rows)};
  };
}

std::shared_ptr<DataAdapter> npy_data_adapter(NpyDataOptions options) {
  return detail::guard_std_exceptions("npy_data_adapter",
                                      [&] { return std::make_shared<NpyDataAdapter>(std::move(options)); });
}

}  // namespace ingot
