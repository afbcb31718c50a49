// CudaExecutable: a CudaProgram's modules, constants and runs on a CudaDevice, and the pure
// functions behind it (PTX choice, launch parameter words, program validation).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <functional>
#include <set>

#include "cuda/driver_api.h"
#include "cuda/module_load.h"
#include "ingot/runtime/cuda_conv_params.h"
#include "ingot/runtime/cuda_executable.h"
#include "ingot/runtime/error.h"

namespace ingot {
namespace {

constexpr const char* kProgramHint =
    "the CudaProgram is malformed: rebuild it with compile_cuda (or fix the hand-made program)";

/// The number of "sm_<digits>", or -1 for other names.
int arch_number(const std::string& arch) {
  if (arch.size() <= 3 || arch.compare(0, 3, "sm_") != 0) return -1;
  int value = 0;
  const char* first = arch.data() + 3;
  const char* last = arch.data() + arch.size();
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last) return -1;
  return value;
}

std::vector<std::string> keys_of(const CudaKernelImage& image) {
  std::vector<std::string> keys;
  for (const auto& [arch, ptx] : image.ptx) keys.push_back(arch);
  return keys;
}

/// The PTX .entry symbol of kernel `name`: compile_cuda names kernels "<module>.<kernel>" and
/// PTX identifiers cannot contain '.', so the symbol is the part after the last '.'.
std::string entry_symbol(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

std::string view_name(const CudaKernelArg& arg) {
  return fmt::format("view of buffer {} (offset {}, sizes {}, strides {})", arg.buffer, arg.offset,
                     shape_to_string(arg.sizes), shape_to_string(arg.strides));
}

void fail(ErrorCode code, std::string message) { throw Error(code, std::move(message), kProgramHint); }

uint64_t address_of(std::span<const uint64_t> addresses, int64_t buffer, const std::string& where) {
  if (buffer < 0 || buffer >= static_cast<int64_t>(addresses.size())) {
    fail(ErrorCode::kOutOfRange,
         fmt::format("{}: buffer index {} is outside the {} buffer addresses", where, buffer, addresses.size()));
  }
  return addresses[static_cast<size_t>(buffer)];
}

/// Elements of `buffer`, or 0 for a dtype of size 0 (never: every dtype has a size).
int64_t elements_of(const CudaBuffer& buffer) { return buffer.bytes / dtype_size(buffer.dtype); }

/// Checks one memref view against the buffers (see validate_cuda_program).
void check_view(const CudaProgram& p, const CudaKernelArg& arg, const std::string& where) {
  if (arg.kind != CudaKernelArg::Kind::kMemref) {
    fail(ErrorCode::kInvalidArgument, fmt::format("{} is not a memref view", where));
  }
  if (arg.buffer < 0 || arg.buffer >= static_cast<int64_t>(p.buffers.size())) {
    fail(ErrorCode::kOutOfRange,
         fmt::format("{}: buffer index {} is outside the program's {} buffers", where, arg.buffer, p.buffers.size()));
  }
  if (arg.sizes.size() != arg.strides.size()) {
    fail(ErrorCode::kInvalidArgument, fmt::format("{}: the {} has {} sizes but {} strides", where, view_name(arg),
                                                  arg.sizes.size(), arg.strides.size()));
  }
  int64_t last = arg.offset;
  bool empty = false;
  for (size_t d = 0; d < arg.sizes.size(); ++d) {
    if (arg.sizes[d] < 0 || arg.strides[d] < 0) {
      fail(ErrorCode::kInvalidArgument, fmt::format("{}: the {} has a negative size or stride", where, view_name(arg)));
    }
    if (arg.sizes[d] == 0)
      empty = true;
    else
      last += (arg.sizes[d] - 1) * arg.strides[d];
  }
  const int64_t n = elements_of(p.buffers[static_cast<size_t>(arg.buffer)]);
  if (arg.offset < 0 || (!empty && last >= n)) {
    fail(ErrorCode::kOutOfRange,
         fmt::format("{}: the {} reaches element {} of a buffer of {} elements", where, view_name(arg), last, n));
  }
}

void check_gemm(const CudaProgram& p, const CudaGemm& g, const std::string& where) {
  if (!is_blas_gemm_dtype(g.dtype)) {
    fail(ErrorCode::kInvalidArgument,
         fmt::format("{}: dtype {} is not f32, f64, f16 or bf16", where, dtype_name(g.dtype)));
  }
  if (g.m < 1 || g.n < 1 || g.k < 1) {
    fail(ErrorCode::kInvalidArgument, fmt::format("{}: m = {}, n = {}, k = {} must be >= 1", where, g.m, g.n, g.k));
  }
  const struct {
    const char* name;
    const CudaKernelArg& view;
    Shape shape;
  } operands[] = {{"A", g.a, g.trans_a ? Shape{g.k, g.m} : Shape{g.m, g.k}},
                  {"B", g.b, g.trans_b ? Shape{g.n, g.k} : Shape{g.k, g.n}},
                  {"C", g.c, Shape{g.m, g.n}}};
  for (const auto& op : operands) {
    const std::string what = fmt::format("{} operand {}", where, op.name);
    check_view(p, op.view, what);
    const Shape contiguous = {op.shape[1], 1};
    if (op.view.sizes != op.shape || op.view.strides != contiguous) {
      fail(ErrorCode::kInvalidArgument,
           fmt::format("{}: the {} is not the contiguous {} matrix the GEMM (m = {}, n = {}, k = {}, "
                       "trans_a = {}, trans_b = {}) needs",
                       what, view_name(op.view), shape_to_string(op.shape), g.m, g.n, g.k, g.trans_a, g.trans_b));
    }
    const DType dt = p.buffers[static_cast<size_t>(op.view.buffer)].dtype;
    if (dt != g.dtype) {
      fail(ErrorCode::kDTypeMismatch, fmt::format("{}: buffer {} has dtype {} but the GEMM is {}", what, op.view.buffer,
                                                  dtype_name(dt), dtype_name(g.dtype)));
    }
  }
}

/// The bias view of a GEMM with an epilogue: n contiguous elements of the GEMM's dtype (f32, no
/// batch: what cuBLASLt's epilogue path runs).
void check_epilogue(const CudaProgram& p, const CudaGemm& g, const std::string& where) {
  if (g.epilogue == CudaGemm::Epilogue::kNone) return;
  const std::string what = fmt::format("{} (epilogue {})", where, epilogue_name(g.epilogue));
  if (g.dtype != DType::kF32 || g.batched) {
    fail(ErrorCode::kInvalidArgument, fmt::format("{}: epilogues run on f32 GEMMs without batch, not a {}{} GEMM", what,
                                                  dtype_name(g.dtype), g.batched ? " batched" : ""));
  }
  check_view(p, g.bias, what + " bias");
  if (g.bias.sizes != Shape{g.n} || g.bias.strides != Shape{1}) {
    fail(ErrorCode::kInvalidArgument,
         fmt::format("{}: the bias {} is not {} contiguous elements (n)", what, view_name(g.bias), g.n));
  }
  const DType dt = p.buffers[static_cast<size_t>(g.bias.buffer)].dtype;
  if (dt != g.dtype) {
    fail(ErrorCode::kDTypeMismatch, fmt::format("{}: the bias's buffer {} has dtype {} but the GEMM is {}", what,
                                                g.bias.buffer, dtype_name(dt), dtype_name(g.dtype)));
  }
  if (g.bias.offset % 4 != 0) {  // 16 bytes of f32 (cuBLASLt's bias kernels may assume it)
    fail(ErrorCode::kInvalidArgument,
         fmt::format("{}: the bias starts at element {}, not a multiple of 4 (16 bytes)", what, g.bias.offset));
  }
}

void check_launch(const CudaProgram& p, const CudaLaunch& l, const std::string& where) {
  if (std::none_of(p.kernels.begin(), p.kernels.end(), [&](const CudaKernelImage& k) { return k.name == l.kernel; })) {
    fail(ErrorCode::kNotFound, fmt::format("{}: the program has no kernel '{}'", where, l.kernel));
  }
  for (int d = 0; d < 3; ++d) {
    if (l.grid[d] < 1 || l.block[d] < 1 || l.grid[d] > 0x7fffffff || l.block[d] > 1024) {
      fail(ErrorCode::kInvalidArgument,
           fmt::format("{} ({}): grid ({}) and block ({}) sizes must be in [1, 2^31 - 1] and [1, 1024]", where,
                       l.kernel, fmt::join(l.grid, ", "), fmt::join(l.block, ", ")));
    }
  }
  for (size_t i = 0; i < l.args.size(); ++i) {
    if (l.args[i].kind == CudaKernelArg::Kind::kMemref) {
      check_view(p, l.args[i], fmt::format("{} ({}) argument {}", where, l.kernel, i));
    }
  }
}

/// A convolution thunk: f32/f64, operands contiguous 1-D views of the spec's shapes in that
/// dtype, the kernel in the program, a valid grid and block and a whole CudaConvParams.
void check_conv(const CudaProgram& p, const CudaConv& c, const std::string& where) {
  if (c.dtype != DType::kF32 && c.dtype != DType::kF64) {
    fail(ErrorCode::kInvalidArgument, fmt::format("{}: dtype {} is not f32 or f64", where, dtype_name(c.dtype)));
  }
  const struct {
    const char* name;
    const CudaKernelArg& view;
    const std::vector<int64_t>& shape;
  } operands[] = {{"lhs", c.lhs, c.spec.lhs_shape}, {"rhs", c.rhs, c.spec.rhs_shape}, {"out", c.out, c.spec.out_shape}};
  for (const auto& op : operands) {
    const std::string what = fmt::format("{} operand {}", where, op.name);
    check_view(p, op.view, what);
    if (op.view.sizes != Shape{num_elements(op.shape)} || op.view.strides != Shape{1}) {
      fail(ErrorCode::kInvalidArgument, fmt::format("{}: the {} is not a contiguous 1-D view of the spec's {}", what,
                                                    view_name(op.view), shape_to_string(op.shape)));
    }
    const DType dt = p.buffers[static_cast<size_t>(op.view.buffer)].dtype;
    if (dt != c.dtype) {
      fail(ErrorCode::kDTypeMismatch, fmt::format("{}: buffer {} has dtype {} but the convolution is {}", what,
                                                  op.view.buffer, dtype_name(dt), dtype_name(c.dtype)));
    }
  }
  check_launch(p, CudaLaunch{.kernel = c.kernel, .grid = c.grid, .block = c.block, .args = {}}, where);
  const size_t words = sizeof(kernels::CudaConvParams) / sizeof(int64_t);
  if (c.params.size() != words) {
    fail(ErrorCode::kInvalidArgument,
         fmt::format("{}: {} parameter words, the kernel's CudaConvParams has {}", where, c.params.size(), words));
  }
}

/// bool is stored as u8 on the device.
bool same_storage(DType a, DType b) {
  auto stored = [](DType t) { return t == DType::kBool ? DType::kU8 : t; };
  return stored(a) == stored(b);
}

void check_buffers(const CudaProgram& p) {
  std::vector<int> inputs(p.input_types.size()), outputs(p.output_types.size());
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const CudaBuffer& b = p.buffers[i];
    const std::string where = fmt::format("CudaProgram buffer {}", i);
    if (b.bytes != num_elements(b.shape) * dtype_size(b.dtype)) {
      fail(ErrorCode::kInvalidArgument,
           fmt::format("{}: bytes = {} but shape {} of {} takes {}", where, b.bytes, shape_to_string(b.shape),
                       dtype_name(b.dtype), num_elements(b.shape) * dtype_size(b.dtype)));
    }
    if (b.kind == CudaBuffer::Kind::kConstant && static_cast<int64_t>(b.data.size()) != b.bytes) {
      fail(ErrorCode::kInvalidArgument,
           fmt::format("{}: a constant of {} bytes has {} bytes of data", where, b.bytes, b.data.size()));
    }
    if (b.kind != CudaBuffer::Kind::kInput && b.kind != CudaBuffer::Kind::kOutput) continue;
    const bool in = b.kind == CudaBuffer::Kind::kInput;
    const auto& types = in ? p.input_types : p.output_types;
    std::vector<int>& seen = in ? inputs : outputs;
    if (b.index < 0 || b.index >= static_cast<int64_t>(types.size())) {
      fail(ErrorCode::kOutOfRange,
           fmt::format("{}: {} index {} is outside the program's {} {}s", where, in ? "input" : "output", b.index,
                       types.size(), in ? "input" : "output"));
    }
    const auto& [shape, dtype] = types[static_cast<size_t>(b.index)];
    if (shape != b.shape || !same_storage(dtype, b.dtype)) {
      fail(ErrorCode::kShapeMismatch,
           fmt::format("{}: {} {} is {} {} but the buffer is {} {}", where, in ? "input" : "output", b.index,
                       shape_to_string(shape), dtype_name(dtype), shape_to_string(b.shape), dtype_name(b.dtype)));
    }
    ++seen[static_cast<size_t>(b.index)];
  }
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<int>& seen = pass == 0 ? inputs : outputs;
    for (size_t i = 0; i < seen.size(); ++i) {
      if (seen[i] != 1) {
        fail(ErrorCode::kInvalidArgument, fmt::format("CudaProgram: {} {} has {} buffers (expected one)",
                                                      pass == 0 ? "input" : "output", i, seen[i]));
      }
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Pure functions

std::string select_cuda_ptx_arch(const CudaKernelImage& image, int major, int minor) {
  if (major < 1 || minor < 0 || minor > 9) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("select_cuda_ptx_arch(kernel '{}'): compute capability {}.{} is not a valid "
                            "major.minor",
                            image.name, major, minor),
                "pass the device's CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR");
  }
  const std::string exact = fmt::format("sm_{}{}", major, minor);
  if (image.ptx.count(exact) != 0) return exact;
  const int device = 10 * major + minor;
  std::string best;
  int best_number = -1;
  for (const auto& [arch, ptx] : image.ptx) {
    const int n = arch_number(arch);
    if (n >= 0 && n <= device && n > best_number) {
      best = arch;
      best_number = n;
    }
  }
  if (best_number >= 0) return best;
  throw Error(ErrorCode::kNotFound,
              fmt::format("kernel '{}' has PTX for [{}] but none runs on a device of compute capability "
                          "{}.{} ({}): PTX runs only on its architecture or newer ones",
                          image.name, fmt::join(keys_of(image), ", "), major, minor, exact),
              fmt::format("compile for {} or an older architecture (CudaCompileOptions::archs)", exact));
}

std::vector<uint64_t> cuda_launch_words(const CudaLaunch& launch, std::span<const uint64_t> buffer_addresses) {
  std::vector<uint64_t> words;
  for (size_t i = 0; i < launch.args.size(); ++i) {
    const CudaKernelArg& arg = launch.args[i];
    if (arg.kind == CudaKernelArg::Kind::kIndex) {
      words.push_back(static_cast<uint64_t>(arg.value));
      continue;
    }
    const std::string where = fmt::format("launch of '{}', argument {}", launch.kernel, i);
    const uint64_t address = address_of(buffer_addresses, arg.buffer, where);
    if (arg.sizes.size() != arg.strides.size()) {
      fail(ErrorCode::kInvalidArgument, fmt::format("{}: the {} has {} sizes but {} strides", where, view_name(arg),
                                                    arg.sizes.size(), arg.strides.size()));
    }
    words.push_back(address);  // allocated pointer
    words.push_back(address);  // aligned pointer (the view's offset is the next word, not added here)
    words.push_back(static_cast<uint64_t>(arg.offset));
    for (int64_t s : arg.sizes) words.push_back(static_cast<uint64_t>(s));
    for (int64_t s : arg.strides) words.push_back(static_cast<uint64_t>(s));
  }
  return words;
}

std::vector<std::vector<uint64_t>> cuda_launch_parameter_words(const CudaProgram& program,
                                                               std::span<const uint64_t> buffer_addresses) {
  std::vector<std::vector<uint64_t>> out;
  for (const CudaThunk& t : program.thunks) {
    if (t.kind == CudaThunk::Kind::kLaunch) out.push_back(cuda_launch_words(t.launch, buffer_addresses));
  }
  return out;
}

namespace {

/// The batch count and strides of the strided-batched call of a batched GEMM (column_major_gemm):
/// the first operand of the column-major call is B, the second A.
void set_batch_strides(const CudaGemm& g, CudaBlasGemm& call) {
  if (g.batch < 1) {
    fail(ErrorCode::kInvalidArgument, fmt::format("column_major_gemm: batch = {} must be >= 1", g.batch));
  }
  for (const CudaKernelArg* v : {&g.a, &g.b, &g.c}) {
    if (v->strides.size() != 3) {
      fail(ErrorCode::kInvalidArgument,
           fmt::format("column_major_gemm: a batched GEMM operand view has rank {}", v->strides.size()));
    }
  }
  call.batch = g.batch;
  call.stride_a = g.b.strides[0];
  call.stride_b = g.a.strides[0];
  call.stride_c = g.c.strides[0];
}

}  // namespace

CudaBlasGemm column_major_gemm(const CudaGemm& g, std::span<const uint64_t> buffer_addresses) {
  if (!is_blas_gemm_dtype(g.dtype)) {
    fail(ErrorCode::kInvalidArgument,
         fmt::format("column_major_gemm: dtype {} is not f32, f64, f16 or bf16", dtype_name(g.dtype)));
  }
  if (g.m < 1 || g.n < 1 || g.k < 1) {
    fail(ErrorCode::kInvalidArgument,
         fmt::format("column_major_gemm: m = {}, n = {}, k = {} must be >= 1", g.m, g.n, g.k));
  }
  const auto element = static_cast<uint64_t>(dtype_size(g.dtype));
  auto operand = [&](const CudaKernelArg& view, const char* name) {
    return address_of(buffer_addresses, view.buffer, fmt::format("GEMM operand {}", name)) +
           static_cast<uint64_t>(view.offset) * element;
  };
  CudaBlasGemm call;
  call.dtype = g.dtype;
  // C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m): B is the first operand, A the second.
  call.trans_a = g.trans_b;
  call.trans_b = g.trans_a;
  call.m = g.n;
  call.n = g.m;
  call.k = g.k;
  call.a = operand(g.b, "B");
  call.lda = g.trans_b ? g.k : g.n;
  call.b = operand(g.a, "A");
  call.ldb = g.trans_a ? g.m : g.k;
  call.c = operand(g.c, "C");
  call.ldc = g.n;
  if (g.batched) set_batch_strides(g, call);
  call.epilogue = g.epilogue;  // the bias runs along C^T's rows (n of them): cuBLASLt's layout
  if (g.epilogue != CudaGemm::Epilogue::kNone) call.bias = operand(g.bias, "bias");
  return call;
}

void check_donated(const CudaProgram& p) {
  std::set<int64_t> ins, outs;
  for (const auto& [in, out] : p.donated) {
    if (in < 0 || in >= static_cast<int64_t>(p.input_types.size()) || out < 0 ||
        out >= static_cast<int64_t>(p.output_types.size())) {
      fail(ErrorCode::kOutOfRange, fmt::format("CudaProgram::donated: pair (input {}, output {}) is outside the "
                                               "program's {} inputs and {} outputs",
                                               in, out, p.input_types.size(), p.output_types.size()));
    }
    if (!ins.insert(in).second || !outs.insert(out).second) {
      fail(ErrorCode::kInvalidArgument,
           fmt::format("CudaProgram::donated: input {} or output {} appears in two pairs", in, out));
    }
    if (p.input_types[static_cast<size_t>(in)] != p.output_types[static_cast<size_t>(out)]) {
      fail(ErrorCode::kShapeMismatch,
           fmt::format("CudaProgram::donated: input {} and output {} differ in type", in, out));
    }
  }
}

uint32_t blas_alignment_bytes(uint64_t address) {
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

std::vector<CudaBlasGemm> cuda_blas_calls(const CudaGemm& g, std::span<const uint64_t> buffer_addresses) {
  const CudaBlasGemm one = column_major_gemm(g, buffer_addresses);
  if (one.batch == 1 || one.stride_c >= g.m * g.n) return {one};
  std::vector<CudaBlasGemm> calls;  // overlapping C matrices: in order, one product at a time
  for (const CudaGemm& e : g.batch_elements()) calls.push_back(column_major_gemm(e, buffer_addresses));
  return calls;
}

void validate_cuda_program(const CudaProgram& program) {
  check_buffers(program);
  check_donated(program);
  std::set<std::string> names;
  for (const CudaKernelImage& k : program.kernels) {
    if (k.ptx.empty()) fail(ErrorCode::kInvalidArgument, fmt::format("CudaProgram kernel '{}' has no PTX", k.name));
    if (!names.insert(k.name).second) {
      fail(ErrorCode::kInvalidArgument, fmt::format("CudaProgram has two kernels named '{}'", k.name));
    }
  }
  for (size_t i = 0; i < program.thunks.size(); ++i) {
    const CudaThunk& t = program.thunks[i];
    const std::string where = fmt::format("CudaProgram thunk {}", i);
    if (t.kind == CudaThunk::Kind::kLaunch)
      check_launch(program, t.launch, where);
    else if (t.kind == CudaThunk::Kind::kConv)
      check_conv(program, t.conv, where + " (convolution)");
    else {
      check_epilogue(program, t.gemm, where + " (GEMM)");
      for (const CudaGemm& g : t.gemm.batch_elements()) check_gemm(program, g, where + " (GEMM)");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// CudaExecutable

CudaExecutable::CudaExecutable(CudaProgram program, CudaDevice& device, std::shared_ptr<CudaBlas> blas)
    : program_(std::move(program)), device_(device), blas_(std::move(blas)) {}

namespace {

/// The CudaDnn for `create`'s `dnn` argument (see CudaExecutable::create), and why there is none.
std::shared_ptr<CudaDnn> conv_library(const CudaProgram& program, CudaDevice& device,
                                      std::optional<std::shared_ptr<CudaDnn>> dnn, const LibrarySearch& libraries,
                                      std::string& reason) {
  if (dnn) {
    if (*dnn == nullptr) reason = "no CudaDnn was given (CudaExecutable::create)";
    return *dnn;
  }
  if (program.convs().empty()) return nullptr;
  const std::shared_ptr<CudnnLibrary> cudnn = CudnnLibrary::load(libraries);  // `ingot cuda-info` shows the result
  if (!cudnn->available()) {
    reason = "cuDNN is not available: " + cudnn->unavailable_reason();
    return nullptr;
  }
  try {
    return cudnn->create(device);
  } catch (const Error& e) {
    reason = "cuDNN is not available: " + e.message();
    return nullptr;
  }
}

}  // namespace

std::unique_ptr<CudaExecutable> CudaExecutable::create(CudaProgram program, CudaDevice& device,
                                                       std::shared_ptr<CudaBlas> blas,
                                                       std::optional<std::shared_ptr<CudaDnn>> dnn,
                                                       CudaExecutableOptions options) {
  validate_cuda_program(program);
  if (options.graph_cache_size < 1 || options.graph_cache_size > 1024) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("CudaExecutable::create: CudaExecutableOptions::graph_cache_size is {}, not in [1, 1024]",
                            options.graph_cache_size),
                "keep a few graphs (the default 4 covers a trainer's alternating batch buffers)");
  }
  std::string dnn_reason;
  std::shared_ptr<CudaDnn> conv_dnn = conv_library(program, device, std::move(dnn), options.libraries, dnn_reason);
  const bool has_gemm = program.gemm_count() > 0;
  std::unique_ptr<CudaExecutable> e(new CudaExecutable(std::move(program), device, std::move(blas)));
  e->load_modules();  // on an error the destructor unloads what was loaded
  if (has_gemm && e->blas_ == nullptr) {
    std::shared_ptr<CublasLibrary> cublas = CublasLibrary::load(options.libraries);
    e->blas_ = cublas->create(device);
  }
  e->upload_constants();
  e->options_ = options;
  if (options.cuda_graphs) e->prepare_graphs();
  e->dnn_ = std::move(conv_dnn);
  e->dnn_reason_ = std::move(dnn_reason);
  const size_t convs = e->program_.convs().size();
  e->conv_choices_.resize(convs);
  e->conv_plans_.resize(convs);
  e->conv_workspaces_.resize(convs);
  e->epilogue_fallbacks_.resize(
      static_cast<size_t>(std::count_if(e->program_.thunks.begin(), e->program_.thunks.end(),
                                        [](const CudaThunk& t) { return t.kind == CudaThunk::Kind::kGemm; })));
  return e;
}

CudaExecutable::~CudaExecutable() {
  const cuda_detail::DriverApi& api = device_.driver()->api();
  // Runs still in flight may use the modules and constants: let the compute stream drain.
  try {
    device_.compute_stream().synchronize();
  } catch (const Error&) {  // a failed run was reported through its event; unload regardless
  }
  destroy_graphs();
  for (CUmod_st* m : modules_) {
    if (m != nullptr) (void)api.cuModuleUnload(m);
  }
}

void CudaExecutable::load_modules() {
  const cuda_detail::DriverApi& api = device_.driver()->api();
  device_.make_current();
  int major = 0, minor = 0;
  CUdevice dev = 0;
  const std::string what = fmt::format("reading the compute capability of {}", device_.name());
  cuda_detail::check(api, api.cuDeviceGet(&dev, device_.ordinal()), "cuDeviceGet", what);
  cuda_detail::check(api, api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                     "cuDeviceGetAttribute", what);
  cuda_detail::check(api, api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                     "cuDeviceGetAttribute", what);
  for (const CudaKernelImage& k : program_.kernels) archs_.push_back(select_cuda_ptx_arch(k, major, minor));
  for (size_t i = 0; i < program_.kernels.size(); ++i) {
    const CudaKernelImage& k = program_.kernels[i];
    const std::string loading = fmt::format("loading kernel '{}' ({} PTX) on {}", k.name, archs_[i], device_.name());
    const std::string& ptx = k.ptx.at(archs_[i]);
    cuda_detail::check_ptx_driver(ptx, device_.driver()->driver_version(), loading);
    CUmodule module = nullptr;
    cuda_detail::load_module(api, &module, ptx, loading);
    modules_.push_back(module);
    CUfunction function = nullptr;
    const std::string symbol = entry_symbol(k.name);
    cuda_detail::check(api, api.cuModuleGetFunction(&function, module, symbol.c_str()), "cuModuleGetFunction",
                       fmt::format("{} (entry '{}')", loading, symbol));
    functions_.push_back(function);
  }
}

void CudaExecutable::upload_constants() {
  constants_.resize(program_.buffers.size());
  std::shared_ptr<CudaEvent> last;
  for (size_t i = 0; i < program_.buffers.size(); ++i) {
    const CudaBuffer& b = program_.buffers[i];
    if (b.kind != CudaBuffer::Kind::kConstant) continue;
    constants_[i] = Buffer::allocate(device_.device(), b.bytes);
    last = device_.copy_to_device_async(b.data.data(), constants_[i]->data(), b.bytes);
  }
  // The copy stream runs the uploads in order: waiting for the last covers them all.
  if (last != nullptr) device_.compute_stream().wait(*last);
}

void CudaExecutable::check_arrays(std::span<const Array> arrays, bool outputs) const {
  const auto& types = outputs ? program_.output_types : program_.input_types;
  const char* kind = outputs ? "outputs" : "inputs";
  const char* one = outputs ? "output" : "input";
  if (arrays.size() != types.size()) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("CudaExecutable::run: {} {} given, the program takes {}", arrays.size(), kind, types.size()),
        fmt::format("pass one array per program {} (program().{}_types)", one, one));
  }
  for (size_t i = 0; i < arrays.size(); ++i) {
    const Array& a = arrays[i];
    const auto& [shape, dtype] = types[i];
    if (!a.valid() || a.num_shards() != 1 || &a.device() != &device_.device()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("CudaExecutable::run: {} {} is {}, not an array on {}", one, i,
                              !a.valid()            ? "invalid"
                              : a.num_shards() != 1 ? "sharded"
                                                    : "on " + a.device().name(),
                              device_.name()),
                  "allocate it on the executable's device or copy it there (CudaDevice::copy_async)");
    }
    if (a.shape() != shape) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("CudaExecutable::run: {} {} has shape {}, the program expects {}", one, i,
                              shape_to_string(a.shape()), shape_to_string(shape)),
                  "pass arrays of the shapes the program was compiled for");
    }
    if (a.dtype() != dtype) {
      throw Error(ErrorCode::kDTypeMismatch,
                  fmt::format("CudaExecutable::run: {} {} has dtype {}, the program expects {}", one, i,
                              dtype_name(a.dtype()), dtype_name(dtype)),
                  "convert the array first");
    }
  }
}

std::vector<uint64_t> CudaExecutable::buffer_addresses(std::span<const Array> inputs, std::span<const Array> outputs,
                                                       std::vector<std::shared_ptr<Buffer>>& temporaries) const {
  auto address = [](const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); };
  std::vector<uint64_t> out(program_.buffers.size());
  for (size_t i = 0; i < program_.buffers.size(); ++i) {
    const CudaBuffer& b = program_.buffers[i];
    switch (b.kind) {
      case CudaBuffer::Kind::kInput:
        out[i] = address(inputs[static_cast<size_t>(b.index)].buffer()->data());
        break;
      case CudaBuffer::Kind::kOutput:
        out[i] = address(outputs[static_cast<size_t>(b.index)].buffer()->data());
        break;
      case CudaBuffer::Kind::kConstant:
        out[i] = address(constants_[i]->data());
        break;
      case CudaBuffer::Kind::kTemporary:
        if (arena_ != nullptr) {  // graphs: fixed addresses
          out[i] = address(arena_->data()) + static_cast<uint64_t>(arena_offsets_[i]);
          break;
        }
        temporaries.push_back(Buffer::allocate(device_.device(), b.bytes));
        out[i] = address(temporaries.back()->data());
        break;
    }
  }
  return out;
}

void CudaExecutable::launch(const CudaLaunch& l, std::span<const uint64_t> addresses, const CudaStream& stream) const {
  const auto it = std::find_if(program_.kernels.begin(), program_.kernels.end(),
                               [&](const CudaKernelImage& k) { return k.name == l.kernel; });
  CUfunction function = functions_[static_cast<size_t>(it - program_.kernels.begin())];
  std::vector<uint64_t> words = cuda_launch_words(l, addresses);
  std::vector<void*> params;
  params.reserve(words.size());
  for (uint64_t& w : words) params.push_back(&w);
  const cuda_detail::DriverApi& api = device_.driver()->api();
  auto u = [](int64_t v) { return static_cast<unsigned>(v); };
  cuda_detail::check(
      api,
      api.cuLaunchKernel(function, u(l.grid[0]), u(l.grid[1]), u(l.grid[2]), u(l.block[0]), u(l.block[1]),
                         u(l.block[2]), 0, stream.handle(), params.empty() ? nullptr : params.data(), nullptr),
      "cuLaunchKernel",
      fmt::format("launching kernel '{}' (grid {}, block {}) on {}", l.kernel, fmt::join(l.grid, "x"),
                  fmt::join(l.block, "x"), device_.name()));
}

CUfunction CudaExecutable::function_of(const std::string& kernel) const {
  const auto it = std::find_if(program_.kernels.begin(), program_.kernels.end(),
                               [&](const CudaKernelImage& k) { return k.name == kernel; });
  return functions_[static_cast<size_t>(it - program_.kernels.begin())];
}

void CudaExecutable::run_conv(const CudaConv& c, std::span<const uint64_t> addresses, const CudaStream& stream) const {
  const auto element = static_cast<uint64_t>(dtype_size(c.dtype));
  auto operand = [&](const CudaKernelArg& view, const char* name) {
    return address_of(addresses, view.buffer, fmt::format("convolution operand {}", name)) +
           static_cast<uint64_t>(view.offset) * element;
  };
  uint64_t lhs = operand(c.lhs, "lhs"), rhs = operand(c.rhs, "rhs"), out = operand(c.out, "out");
  std::vector<int64_t> params = c.params;  // the kernel's CudaConvParams, by value
  void* args[] = {&lhs, &rhs, &out, params.data()};
  const cuda_detail::DriverApi& api = device_.driver()->api();
  auto u = [](int64_t v) { return static_cast<unsigned>(v); };
  cuda_detail::check(api,
                     api.cuLaunchKernel(function_of(c.kernel), u(c.grid[0]), u(c.grid[1]), u(c.grid[2]), u(c.block[0]),
                                        u(c.block[1]), u(c.block[2]), 0, stream.handle(), args, nullptr),
                     "cuLaunchKernel",
                     fmt::format("launching convolution kernel '{}' (grid {}) on {}", c.kernel, fmt::join(c.grid, "x"),
                                 device_.name()));
}

namespace {

/// Mean milliseconds of `fn` over `runs` runs after one warm-up, timed on the host around
/// synchronisations of `stream` (the work enqueued before is drained first).
double time_ms(const CudaStream& stream, int runs, const std::function<void()>& fn) {
  fn();
  stream.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) fn();
  stream.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / runs;
}

}  // namespace

void CudaExecutable::choose_conv(size_t index, const CudaConv& c, std::span<const uint64_t> addresses) const {
  CudaConvChoice choice{.engine = CudaConvChoice::Engine::kImplicitGemm};
  const CudnnConvMapping mapping = cudnn_conv_mapping(c.spec);
  if (dnn_ == nullptr || !mapping.expressible) {
    choice.reason = dnn_ == nullptr ? dnn_reason_ : "cuDNN cannot express it: " + mapping.reason;
    conv_choices_[index] = choice;
    return;
  }
  // Only the DNN's own failures fall back to the kernel; a device error (a failed
  // synchronisation) propagates as from any run.
  std::string dnn_error;
  CudaDnnConvPlan plan;
  std::shared_ptr<Buffer> workspace;
  try {
    plan = dnn_->plan_conv(mapping, c.dtype);
    if (plan.workspace_bytes > 0) workspace = Buffer::allocate(device_.device(), plan.workspace_bytes);
  } catch (const Error& e) {
    dnn_error = e.message();
  }
  const CudaStream& stream = device_.compute_stream();
  if (dnn_error.empty()) {
    const uint64_t ws =
        workspace == nullptr ? 0 : static_cast<uint64_t>(reinterpret_cast<uintptr_t>(workspace->data()));
    choice.implicit_gemm_ms = time_ms(stream, kConvTimingRuns, [&] { run_conv(c, addresses, stream); });
    choice.cudnn_ms = time_ms(stream, kConvTimingRuns, [&] {
      if (!dnn_error.empty()) return;
      try {
        cudnn_forward(plan, ws, c, addresses, stream);
      } catch (const Error& e) {
        dnn_error = e.message();
      }
    });
  }
  if (!dnn_error.empty()) {
    conv_choices_[index] = {.engine = CudaConvChoice::Engine::kImplicitGemm, .reason = "cuDNN failed: " + dnn_error};
    return;
  }
  choice.engine = choice.cudnn_ms < choice.implicit_gemm_ms ? CudaConvChoice::Engine::kCudnn
                                                            : CudaConvChoice::Engine::kImplicitGemm;
  choice.reason = "timed";
  choice.cudnn_algorithm = plan.algorithm;
  choice.workspace_bytes = plan.workspace_bytes;
  conv_plans_[index] = plan;
  if (choice.engine == CudaConvChoice::Engine::kCudnn) conv_workspaces_[index] = std::move(workspace);
  conv_choices_[index] = choice;
}

void CudaExecutable::cudnn_forward(const CudaDnnConvPlan& plan, uint64_t workspace, const CudaConv& c,
                                   std::span<const uint64_t> addresses, const CudaStream& stream) const {
  const auto element = static_cast<uint64_t>(dtype_size(c.dtype));
  auto operand = [&](const CudaKernelArg& view, const char* name) {
    return address_of(addresses, view.buffer, fmt::format("convolution operand {}", name)) +
           static_cast<uint64_t>(view.offset) * element;
  };
  dnn_->conv_forward(plan, operand(c.lhs, "lhs"), operand(c.rhs, "rhs"), operand(c.out, "out"), workspace, stream);
}

void CudaExecutable::run_chosen_conv(size_t index, const CudaConv& c, std::span<const uint64_t> addresses,
                                     const CudaStream& stream) const {
  if (conv_choices_[index].engine != CudaConvChoice::Engine::kCudnn) return run_conv(c, addresses, stream);
  const std::shared_ptr<Buffer>& workspace = conv_workspaces_[index];
  const uint64_t ws = workspace == nullptr ? 0 : static_cast<uint64_t>(reinterpret_cast<uintptr_t>(workspace->data()));
  cudnn_forward(conv_plans_[index], ws, c, addresses, stream);
}

std::vector<CudaConvChoice> CudaExecutable::conv_choices() const {
  std::lock_guard<std::mutex> lock(run_mu_);
  return conv_choices_;
}

std::shared_ptr<CudaEvent> CudaExecutable::run(std::span<const Array> inputs, std::span<const Array> outputs) const {
  check_arrays(inputs, false);
  check_arrays(outputs, true);
  std::set<const Buffer*> used;
  for (const Array& a : inputs) used.insert(a.buffer().get());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Buffer* buffer = outputs[i].buffer().get();
    // A donated input's own array may be passed as its paired output (written in place).
    const bool in_place = std::any_of(program_.donated.begin(), program_.donated.end(), [&](const auto& d) {
      return d.second == static_cast<int64_t>(i) && inputs[static_cast<size_t>(d.first)].buffer().get() == buffer;
    });
    if (!in_place && !used.insert(buffer).second) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("CudaExecutable::run: output {} shares its buffer with an input or an earlier output", i),
                  "pass a separate array for every output (or the donated input of CudaProgram::donated)");
    }
  }
  std::lock_guard<std::mutex> lock(run_mu_);
  std::vector<std::shared_ptr<Buffer>> temporaries;  // released on return: the allocator is stream-ordered
  const std::vector<uint64_t> addresses = buffer_addresses(inputs, outputs, temporaries);
  device_.make_current();
  if (options_.cuda_graphs)
    run_with_graphs(addresses);
  else
    enqueue_thunks(addresses, device_.compute_stream());
  return device_.compute_stream().record();
}

void CudaExecutable::enqueue_thunks(std::span<const uint64_t> addresses, const CudaStream& stream) const {
  size_t conv = 0, gemm = 0;
  for (const CudaThunk& t : program_.thunks) {
    if (t.kind == CudaThunk::Kind::kLaunch)
      launch(t.launch, addresses, stream);
    else if (t.kind == CudaThunk::Kind::kConv) {
      if (conv_choices_[conv].engine == CudaConvChoice::Engine::kUndecided) choose_conv(conv, t.conv, addresses);
      run_chosen_conv(conv++, t.conv, addresses, stream);
    } else {
      run_gemm(gemm++, t.gemm, addresses, stream);
    }
  }
}

std::vector<Array> CudaExecutable::run(std::span<const Array> inputs) const {
  std::vector<Array> outputs;
  for (const auto& [shape, dtype] : program_.output_types)
    outputs.push_back(Array::empty(shape, dtype, &device_.device()));
  run(inputs, outputs);
  return outputs;
}

}  // namespace ingot
