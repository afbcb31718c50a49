// Weights I/O in the Hugging Face safetensors format (https://huggingface.co/docs/safetensors),
// the format PyTorch's `safetensors.torch` and the JAX/Flax tools read and write.
//
// File layout (all integers little-endian):
//   bytes [0, 8)        u64 N: the length of the JSON header in bytes
//   bytes [8, 8 + N)    the header: a UTF-8 JSON object
//                         {"__metadata__": {"key": "value", ...},          (optional)
//                          "name": {"dtype": "F32", "shape": [2, 3],
//                                   "data_offsets": [begin, end]}, ...}
//                       padded with spaces so that 8 + N is a multiple of 8
//   bytes [8 + N, ...)  the data section: every tensor's elements, row-major, little-endian;
//                       `data_offsets` are byte offsets into this section.
// dtypes: BOOL, U8, I8, I32, U32, I64, U64, F16, BF16, F32, F64 (ingot's DTypes); the format's
// other dtypes (I16, U16, F8_*) are rejected on load with a clear error.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ingot/runtime/array.h"

namespace ingot {

/// The safetensors dtype string of `dtype`: "BOOL", "U8", "I8", "I32", "U32", "I64", "U64",
/// "F16", "BF16", "F32", "F64".
std::string_view safetensors_dtype_name(DType dtype);
/// Inverse of safetensors_dtype_name. Throws ingot::Error(kInvalidArgument) naming `name` and the
/// supported dtypes for any other string (including the format's I16, U16 and F8 types, which
/// ingot has no DType for).
DType parse_safetensors_dtype(std::string_view name);

/// Largest header a loaded file may declare: 100,000,000 bytes, the reference implementation's
/// limit (safetensors' MAX_HEADER_SIZE); a larger length is treated as a corrupt file.
inline constexpr int64_t kMaxSafetensorsHeaderBytes = 100'000'000;
/// Deepest nesting of JSON arrays and objects a loaded header may have: 64 (a valid header has 3:
/// the header object, a tensor entry, its shape). Deeper headers are refused before parsing, in
/// linear time and constant memory, so a small hostile file cannot exhaust the stack.
inline constexpr int64_t kMaxSafetensorsJsonDepth = 64;

/// The contents of a safetensors file, as load_safetensors returns them.
struct SafetensorsFile {
  /// The file the contents came from (for error messages).
  std::string path;
  /// Tensor names and their values (single-device arrays on default_cpu_device(), each in its
  /// own buffer), in the order of their data in the file (ascending data_offsets; for files
  /// written by save_safetensors: by descending dtype size, then by name, as the reference
  /// implementation orders them).
  std::vector<std::pair<std::string, Array>> tensors;
  /// The header's "__metadata__" entries (empty if the file has none).
  std::map<std::string, std::string> metadata;

  /// The tensor called `name`, or nullptr.
  const Array* find(const std::string& name) const;
  /// The tensor called `name`. Throws ingot::Error(kNotFound) naming `name`, the file and the
  /// file's tensor names.
  const Array& at(const std::string& name) const;
  /// The tensor names, in the order of `tensors`.
  std::vector<std::string> names() const;
};

/// Writes `tensors` and `metadata` to `path` as a safetensors file.
///
/// The file is byte-for-byte what the reference implementation (the `safetensors` Rust crate
/// behind `safetensors.torch.save_file`) writes for the same tensors: compact JSON with
/// "__metadata__" first (omitted when `metadata` is empty; its keys sorted here, where the
/// reference writes them in its hash map's order, so files with two or more metadata entries
/// may differ from the reference's in that order only), then the tensors
/// sorted by descending dtype alignment (U64, I64, F64, F32, U32, I32, BF16, F16, I8, U8, BOOL)
/// and then by name (bytewise), each as {"dtype","shape","data_offsets"} in that key order; the
/// data section holds the tensors in the same order with no gaps, so every tensor's data is
/// aligned to its element size. Bool elements are written as bytes 0/1.
///
/// Any array is accepted: sharded or non-CPU arrays are gathered to the host first (to_host).
/// The data goes to a new temporary file in the same directory, which is flushed to disk and then
/// renamed over `path`, so a failed save never leaves a partial file (an existing file at `path`
/// stays as it was).
///
/// Throws ingot::Error:
///  - kInvalidArgument: an empty name, a name used twice (naming it), the reserved name
///    "__metadata__", a name or metadata string that is not valid UTF-8 (naming it);
///  - kFailedPrecondition: an invalid or donated array (naming the tensor);
///  - kNotFound: the directory of `path` does not exist; kInvalidArgument: any other file-system
///    failure (naming the path and the system's reason).
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Array>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

class OutputFile;
/// save_safetensors into `file`, an OutputFile the caller commits (e.g. together with other
/// outputs, so that a failing one replaces none). Same format and errors.
void save_safetensors(OutputFile& file, const std::vector<std::pair<std::string, Array>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads the safetensors file at `path` (every tensor is read into a new host array).
///
/// The file is validated as the reference implementation does before any data is read; every
/// failure is an ingot::Error naming the file and, where there is one, the tensor and the value:
///  - kNotFound: no file at `path`; kInvalidArgument: it cannot be read (a directory, no
///    permission);
///  - kParseError: a file shorter than 8 bytes; a header length over kMaxSafetensorsHeaderBytes or
///    past the end of the file; a header nested deeper than kMaxSafetensorsJsonDepth; a header that
///    is not valid JSON, not an object, has a tensor
///    name twice, or has an entry that is not {"dtype": string, "shape": [ints >= 0],
///    "data_offsets": [begin, end]} (keys beyond these three are ignored, as the reference
///    does); an unknown dtype; "__metadata__" that is not an object of strings; an element
///    count over kMaxElements; data_offsets with begin > end, a length other than
///    elements * dtype size, an end past the end of the file (a truncated file); tensors whose
///    data overlap or leave a gap, or bytes after the last tensor; a BOOL element other than 0/1.
SafetensorsFile load_safetensors(const std::string& path);

/// Copies tensors of `file` into `targets` (name -> array to overwrite), the semantics of a
/// model's load_weights. Every target's name must be in `file` with exactly the target's shape
/// and dtype (no casting, no reshaping); the file may hold further tensors, which are ignored.
/// Every target is checked before any is changed: on an error, no target has changed.
///
/// Each target is replaced by a copy of the file's array placed with the target's sharding
/// (device_put), so it shares no buffer with `file` or with the target's old value.
///
/// Throws ingot::Error: kInvalidArgument for a null target or a name given twice;
/// kFailedPrecondition for an invalid (default-constructed) target; kNotFound for a name missing
/// from the file (naming it and the file); kShapeMismatch / kDTypeMismatch naming the variable,
/// the file, and both shapes and dtypes; and whatever device_put throws for the target's sharding.
void load_into(const SafetensorsFile& file, std::vector<std::pair<std::string, Array*>> targets);

}  // namespace ingot
