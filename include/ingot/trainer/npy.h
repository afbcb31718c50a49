// Data in NumPy's files: .npy arrays (numpy.save / numpy.load), .npz archives (numpy.savez,
// numpy.savez_compressed), memory-mapped .npy files read a few rows at a time, and a DataAdapter
// that streams batches out of mapped files so `fit` trains on data larger than memory.
//
// The .npy format (NEP 1, "A simple file format for NumPy arrays"; numpy.lib.format):
//   bytes [0, 6)     the magic string "\x93NUMPY"
//   bytes [6, 8)     the format version, major and minor: 1.0, 2.0 or 3.0
//   then             the header's length HLEN: u16 little-endian (1.0) or u32 (2.0, 3.0)
//   then HLEN bytes  the header: a Python dict literal (ASCII/latin-1; UTF-8 in 3.0), e.g.
//                      {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//                    padded with spaces and ended by '\n' so the data starts at a multiple of 64
//   then             the elements: prod(shape) * itemsize bytes, in C (row-major) or Fortran
//                    (column-major) order, in the byte order of 'descr'.
//
// dtypes ('descr' -> ingot DType; '<' little-endian, '>' big-endian, '|' not applicable, '='
// native): '|b1' bool, '|i1' i8, '|u1' u8, '<i4' i32, '<u4' u32, '<i8' i64, '<u8' u64, '<f2' f16,
// '<f4' f32, '<f8' f64 (and their '>' forms). bfloat16 has no NumPy dtype (NumPy has no bf16;
// ml_dtypes writes it as raw void bytes), so bf16 arrays cannot be saved as .npy: convert them to
// f32 (exact) or use save_safetensors. Other dtypes (int16, complex, strings, datetimes, void,
// structured records, Python objects) are refused on load: object arrays hold pickles, and
// pickles are never loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingot/runtime/array.h"
#include "ingot/trainer/data.h"

namespace ingot {

/// The .npy 'descr' ingot writes for `dtype` (little-endian): "|b1", "|i1", "|u1", "<i4", "<u4",
/// "<i8", "<u8", "<f2", "<f4", "<f8". Throws ingot::Error(kInvalidArgument) for bf16, which has no
/// NumPy dtype (the hint says to convert to f32 or use safetensors).
std::string_view npy_descr(DType dtype);

/// Decodes a whole .npy file held in `bytes` (format 1.0, 2.0 or 3.0) into a new host array of the
/// file's shape and dtype: big-endian data is byte-swapped and Fortran-order data transposed to
/// ingot's row-major layout. `name_for_errors` names the source in messages (e.g. "'a.npy'", or
/// "'data.npz' member 'x.npy'").
///
/// The header dict is parsed strictly, as the Python literal NumPy writes (ast.literal_eval's
/// syntax for strings, True/False, integers and tuples, trailing commas allowed; Python 2's "3L"
/// integers in 1.0/2.0 headers too): exactly the keys 'descr' (a dtype string), 'fortran_order'
/// (True/False) and 'shape' (a tuple of integers >= 0, "()" for a scalar, "(5,)" for one
/// dimension). Throws ingot::Error(kParseError) naming the source, the byte offset, what was found
/// and what was expected, for: fewer bytes than the magic, version and header length; a wrong
/// magic string; a version other than 1.0/2.0/3.0; a header longer than the file; a 3.0 header that
/// is not UTF-8; a header that is not such a dict (syntax errors, missing, extra or repeated keys,
/// values of the wrong type); a negative dimension, or an element count or byte size over
/// kMaxElements / int64 (checked arithmetic); data shorter (a truncated file) or longer than the
/// shape needs; a bool element other than 0 or 1; and kUnimplemented for dtypes ingot does not
/// have (naming the descr and the supported ones; '|O' object arrays are refused as pickles).
Array parse_npy(std::span<const std::byte> bytes, const std::string& name_for_errors);

/// Reads the .npy file at `path` (numpy.load of a .npy) into a new host array; see parse_npy for
/// the format and errors. Also: kNotFound when there is no file, kInvalidArgument when it cannot
/// be read (a directory, no permission), naming the path and the system's reason.
Array load_npy(const std::string& path);

/// Writes `a` to `path` as numpy.save does: format 1.0 (2.0 only when the header would not fit
/// 1.0's u16 length), the little-endian descr of npy_descr, C order, and the header padded with
/// spaces (including NumPy's 21 - digits spare spaces after the dict) so the data starts at a
/// multiple of 64: for the same array, the bytes NumPy 1.23+ writes. Bool elements are written
/// as bytes 0/1. The file is written through OutputFile: a failed save leaves no partial file
/// and an existing file stays as it was.
/// Sharded CPU arrays are gathered first (to_host); throws ingot::Error: kFailedPrecondition for
/// an invalid or donated array; kInvalidArgument for bf16 (npy_descr); to_host's kUnimplemented
/// for an array on a non-CPU device; kNotFound for a missing directory and kInvalidArgument for
/// other file-system failures (naming the path and the reason).
void save_npy(const std::string& path, const Array& a);

/// The arrays of an .npz archive, as load_npz returns them (numpy.load of an .npz: an NpzFile).
class NpzFile {
 public:
  NpzFile() = default;
  NpzFile(std::string path, std::vector<std::pair<std::string, Array>> arrays)
      : path_(std::move(path)), arrays_(std::move(arrays)) {}

  /// The archive the arrays came from (for error messages).
  const std::string& path() const { return path_; }
  /// The arrays' names, in archive order (member names without their ".npy" suffix, as np.load's
  /// NpzFile.files).
  std::vector<std::string> names() const;
  /// Number of arrays.
  size_t size() const { return arrays_.size(); }
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  /// The array called `name`, or nullptr.
  const Array* find(const std::string& name) const;
  /// The array called `name`. Throws ingot::Error(kNotFound) naming the archive, `name` and the
  /// names it holds.
  const Array& at(const std::string& name) const;
  /// {name, array} pairs in archive order.
  const std::vector<std::pair<std::string, Array>>& arrays() const { return arrays_; }

 private:
  std::string path_;
  std::vector<std::pair<std::string, Array>> arrays_;
};

/// Reads every array of the .npz archive at `path` (written by numpy.savez or
/// numpy.savez_compressed, or save_npz): a zip archive (PKWARE APPNOTE; zip64 included, as savez
/// writes it) of stored or deflated members "<name>.npy", each a .npy file (parse_npy). Every
/// member's CRC-32 is checked. Throws ingot::Error naming the archive (and the member): kNotFound
/// for no file; kInvalidArgument when it cannot be read; kParseError for an empty file, a file that
/// is not a zip archive, an inconsistent archive, a CRC mismatch or corrupt compressed data, a
/// member whose name does not end in ".npy" (np.load would return its raw bytes; ingot loads only
/// arrays) or a directory, two members with the same name, and every parse_npy error of a member
/// (kUnimplemented for its unsupported dtypes, object arrays included); kUnimplemented for a
/// compression method other than stored or deflate, or an encrypted member.
NpzFile load_npz(const std::string& path);

/// Writes `arrays` to `path` as an .npz archive, as numpy.savez (`compress` false: stored members)
/// or numpy.savez_compressed (`compress` true: deflated members) do: one member "<name>.npy" per
/// array, in the given order, each the bytes save_npy writes. The archive is written through
/// OutputFile (atomically). Throws ingot::Error: kInvalidArgument for an empty name or a name used
/// twice (naming it), and every error of save_npy (naming the array).
void save_npz(const std::string& path, const std::vector<std::pair<std::string, Array>>& arrays, bool compress = false);

/// A C-order .npy file mapped into memory (POSIX mmap, read-only): its header is parsed and
/// checked as parse_npy does when opened, and rows (along the first axis) are copied out on
/// demand, so files larger than memory can be read a batch at a time (the page cache holds what
/// was read recently). Movable, not copyable; the mapping is released on destruction. Safe to read
/// from several threads at once (read_rows does not change the object).
class MappedNpy {
 public:
  /// Maps the file at `path`. Throws ingot::Error: every error parse_npy reports for the file
  /// (checked without reading the data; bool elements are checked as rows are read); kNotFound
  /// for no file, kInvalidArgument when it cannot be opened or mapped; kInvalidArgument for a 0-d
  /// array (it has no rows) and for a Fortran-order array of two or more dimensions (its rows are
  /// not contiguous; the hint says to re-save it in C order, np.save(path,
  /// np.ascontiguousarray(a)), or to read it whole with load_npy).
  static MappedNpy open(const std::string& path);

  MappedNpy(MappedNpy&& other) noexcept;
  MappedNpy& operator=(MappedNpy&& other) noexcept;
  MappedNpy(const MappedNpy&) = delete;
  MappedNpy& operator=(const MappedNpy&) = delete;
  ~MappedNpy();

  const std::string& path() const { return path_; }
  DType dtype() const { return dtype_; }
  /// The array's shape, (rows, ...).
  const Shape& shape() const { return shape_; }
  /// Number of rows: shape()[0].
  int64_t rows() const { return shape_[0]; }
  /// Rows `indices` (each in [0, rows()), repeats allowed, any order) as a new host array of shape
  /// (indices.size(), shape()[1:]...) and dtype(), converted to host byte order. Throws
  /// ingot::Error: kOutOfRange for an index outside [0, rows()) (naming it, its position, the
  /// file and rows()); kParseError for a bool element other than 0/1 (naming its byte offset);
  /// kFailedPrecondition when the file was truncated since it was opened (e.g. np.save writing
  /// it again in place: reading the mapping past its new end would be a SIGBUS; checked before
  /// every read, so only a truncation during the copy itself is not caught; replacing the file
  /// by a rename is safe, the mapping keeps the old one).
  Array read_rows(std::span<const int64_t> indices) const;

 private:
  MappedNpy() = default;
  void release() noexcept;

  std::string path_;
  DType dtype_ = DType::kF32;
  Shape shape_;
  bool swap_ = false;               ///< the data is big-endian
  const std::byte* map_ = nullptr;  ///< the whole file, or null for an empty mapping
  int64_t map_size_ = 0;            ///< bytes mapped
  int64_t data_offset_ = 0;         ///< where the elements start
  int64_t row_bytes_ = 0;           ///< bytes per row
  int fd_ = -1;                     ///< the file, to notice a truncation (fstat) before reading
};

/// npy_data_adapter's options: the .npy files of a data set, each (samples, ...), C order.
struct NpyDataOptions {
  std::vector<std::string> x;              ///< one file per model input (at least one)
  std::vector<std::string> y;              ///< targets: none, or one file per model output
  std::vector<std::string> sample_weight;  ///< none, one for every output, or one per output; each (samples,)
  int64_t batch_size = 32;                 ///< as Keras's default
  bool shuffle = true;                     ///< a seeded permutation of the rows per epoch
  uint64_t seed = 0;                       ///< epoch e's permutation uses seed + e
};

/// A DataAdapter over memory-mapped .npy files (MappedNpy): the batches ArrayDataAdapter would cut
/// from the same arrays loaded into memory -- batches of batch_size rows in order (the last may be
/// smaller), or, with shuffle, in the order of epoch e's permutation (the same std::mt19937_64(seed
/// + e) and std::shuffle as ArrayDataAdapter, so fit gives the same results either way) -- each
/// gathered from the files with read_rows when the batch is produced, so only the batches in
/// flight are in memory. x_types() are the x files' dtypes and shapes with min(batch_size, rows)
/// rows.
/// Throws ingot::Error: everything MappedNpy::open throws (naming the file); kInvalidArgument for
/// no x file, batch_size <= 0, x without rows, a file whose row count differs from x[0]'s (naming
/// both files and both counts), a sample_weight file that is not 1-D, or a sample weight that is
/// not finite (naming the file and the row; the weights are scanned when the adapter is made).
class NpyDataAdapter final : public DataAdapter {
 public:
  explicit NpyDataAdapter(NpyDataOptions options);
  std::optional<int64_t> num_batches() const override;
  std::function<std::optional<Batch>()> epoch(int64_t epoch) override;
  std::vector<ir::TensorType> x_types() const override;
  int64_t num_samples() const { return x_[0]->rows(); }

 private:
  std::vector<std::shared_ptr<const MappedNpy>> x_, y_, sw_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
};

/// std::make_shared<NpyDataAdapter>(options), for FitOptions::data / EvaluateOptions::data.
std::shared_ptr<DataAdapter> npy_data_adapter(NpyDataOptions options);

}  // namespace ingot
