// The only translation unit of the CPU back end that includes MLIR/LLVM headers (they are heavy;
// keeping them here keeps the rest of the build fast).
#include "ingot/codegen/cpu_compiler.h"
#include "ingot/codegen/pass_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "codegen/cpu/mlir_split.h"
#include "codegen/cpu/object_jit.h"
#include "codegen/cpu/passes.h"
#include "codegen/tensor_passes.h"
#include "codegen/cpu/step_cache.h"
#include "codegen/mlir_common.h"
#include "codegen/mlir_registration.h"
#include "ingot/kernels/cpu_gemm.h"
#include "ingot/kernels/cpu_threads.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

namespace ingot::codegen {

int resolve_threads(int num_threads) {
  if (num_threads < 0 || num_threads > kMaxThreads) {
    throw Error(
        ErrorCode::kInvalidArgument, fmt::format("CpuCompileOptions::num_threads is {}", num_threads),
        fmt::format("use 0 for all hardware threads, 1 for serial loops, or a thread count up to {}", kMaxThreads));
  }
  if (num_threads > 0) return num_threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::vector<PipelineStage> default_cpu_pipeline(int num_threads, bool outline_kernels) {
  const int threads = resolve_threads(num_threads);
  // On the CPU a step's results may be its (donated) arguments' buffers: updated in place.
  std::vector<PipelineStage> stages = default_tensor_stages({.results_in_argument_buffers = true});
  std::vector<PipelineStage> back = {
      // MLIR's ownership-based deallocation frees a buffer at the end of its block (the step's
      // end, in the entry); ingot-early-dealloc frees it right after its last use instead.
      {"deallocate", fmt::format("buffer-deallocation-pipeline,func.func({})", pass_names::kEarlyDealloc)},
      // Each top-level loop nest becomes a function of its own (identical nests one function), so
      // the stages below run on many small functions in parallel and LLVM compiles each kernel
      // once and alone (compile_cpu); the entry keeps allocations, views, copies and calls.
      {"outline", std::string(pass_names::kOutlineKernels)},
      // Parallel dims of each linalg op become scf.parallel, reduction dims scf.for (linalg's
      // iteration order); ingot-parallelize-outer-loops keeps the outer parallel dims of nests with
      // enough work and makes everything else serial scf.for. Loops are vectorised by LLVM's loop
      // vectoriser at -O2 for the host's features (AVX-512 here): MLIR's affine-super-vectorize
      // mis-handles strided innermost accesses and single-trip loops, so it is not used.
      // Function-level passes are nested in func.func from here on: MLIR runs them on the kernels
      // (and the entry) in parallel, on the context's threads.
      {"loops", fmt::format("func.func(convert-linalg-to-parallel-loops,{}{{threads={} min-work={}}},canonicalize)",
                            pass_names::kParallelizeOuterLoops, threads, kMinParallelWork)},
      // The remaining scf.parallel loops become OpenMP worksharing loops (libomp runs them);
      // canonicalize inlines the memref.alloca_scope the conversion wraps bodies in.
      {"openmp", fmt::format("convert-scf-to-openmp{{num-threads={}}},func.func(canonicalize)", threads)},
      // ingot-approximate-math first: f32 exp, erf, tanh, log and kin become polynomials that
      // vectorise (a libm call in a loop keeps it scalar); then math-to-llvm before math-to-libm:
      // ops with an LLVM intrinsic stay intrinsics (floor, fma, sqrt vectorise), the rest (f64
      // erf, tanh, ...) become libm calls; convert-to-llvm then converts
      // memref, arith, cf, func, ub and the types inside OpenMP regions in one walk (the separate
      // finalize-memref / ub / openmp / vector conversions walked the module five more times:
      // 0.3 s of the 4-block LM's 0.55 s here). The default stages emit no vector ops; a custom
      // pipeline that vectorises adds convert-vector-to-scf{full-unroll=true} (docs/compiler.md).
      // ingot-noalias-scopes carries the kernels' noalias buffers (ingot-outline-kernels) into the
      // OpenMP loop bodies as alias scopes.
      {"lower-to-llvm",
       fmt::format("func.func({},lower-affine,convert-scf-to-cf,expand-strided-metadata,convert-math-to-llvm),"
                   "convert-math-to-libm,convert-to-llvm,reconcile-unrealized-casts,llvm.func({})",
                   pass_names::kApproximateMath, pass_names::kNoaliasScopes)},
  };
  if (!outline_kernels) back.erase(back.begin() + 1);
  stages.insert(stages.end(), back.begin(), back.end());
  return stages;
}

namespace {

/// Process-wide MLIR/LLVM initialisation: target registration and MLIR's global pass registry
/// (both are global by MLIR's design); done once, thread-safely.
void initialise_mlir_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // LLVM's ConstraintElimination (Fourier-Motzkin over the loop bounds' facts) took a quarter of
    // the LM step's code generation (bench/results/2026-12-01-compile-time.md) and removes no
    // check that matters in MLIR's loop nests (their bounds are static). It is an LLVM option,
    // process-wide by LLVM's design, set once here with the rest of LLVM's initialisation.
    auto& llvm_options = llvm::cl::getRegisteredOptions();
    if (auto it = llvm_options.find("enable-constraint-elimination"); it != llvm_options.end()) {
      static_cast<llvm::cl::opt<bool>*>(it->second)->setValue(false);
    }
    // Loop strength reduction was a fifth of the kernels' code generation (llc -time-passes on
    // the 4-block LM's kernels) and changed no bench step time measurably (2026-12-02 report):
    // MLIR's loops index with constant strides that instcombine and the addressing modes handle.
    if (auto it = llvm_options.find("disable-lsr"); it != llvm_options.end()) {
      static_cast<llvm::cl::opt<bool>*>(it->second)->setValue(true);
    }
    detail::register_mlir_passes();
    register_cpu_passes();
  });
}

mlir::DialectRegistry make_registry() {
  mlir::DialectRegistry registry;
  detail::register_mlir_dialects(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerOpenMPDialectTranslation(registry);
  return registry;
}

using detail::DiagnosticCollector;
using detail::module_text;
using detail::write_file;

constexpr const char* kDumpHint =
    "set CpuCompileOptions::dump_dir (for jit(): the INGOT_DUMP_DIR variable; for ingot-opt: --dump-dir) to see "
    "the IR after each stage";

[[noreturn]] void fail(const std::string& what, const std::string& diagnostics, const std::string& dump_dir) {
  detail::fail(what, diagnostics, dump_dir, kDumpHint);
}

/// After the `lower-to-llvm` stage every op must be in the llvm dialect, the omp dialect (which the
/// translation to LLVM IR handles, over LLVM-dialect types) or a builtin.module: a
/// tensor-level module given to that stage alone converts only partly, and MLIR reports no error.
void check_all_llvm(mlir::ModuleOp module, const std::string& dump_dir) {
  std::string left;
  module.walk([&](mlir::Operation* op) {
    const llvm::StringRef ns = op->getName().getDialectNamespace();
    if (left.empty() && ns != "llvm" && ns != "omp" && ns != "builtin") left = op->getName().getStringRef().str();
  });
  if (left.empty()) return;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("stage 'lower-to-llvm' left '{}' unconverted{}", left,
                          dump_dir.empty() ? "" : fmt::format(" (dumps in {})", dump_dir)),
              "lower-to-llvm expects the output of the earlier stages (loops over memrefs): run the "
              "pipeline from the start (ingot-opt --until lower-to-llvm)");
}

/// Whether `op` (named `name`, of `dialect`) is counted as one loop nest at the top level of the
/// entry. A linalg operation without loops (on rank-0 buffers) is a few scalar instructions, not a
/// nest: the counts after `outline` and after `openmp` (where it is scalar code) then agree.
bool is_loop_nest(mlir::Operation& op, llvm::StringRef name, llvm::StringRef dialect) {
  static constexpr std::array<llvm::StringRef, 7> kLoops = {"scf.for",    "scf.parallel",    "scf.forall",  "scf.while",
                                                            "affine.for", "affine.parallel", "omp.parallel"};
  if (std::find(kLoops.begin(), kLoops.end(), name) != kLoops.end()) return true;
  if (dialect != "linalg" || name == "linalg.yield" || name == "linalg.index") return false;
  auto linalg = mlir::dyn_cast<mlir::linalg::LinalgOp>(op);
  return linalg == nullptr || linalg.getNumLoops() > 0;
}

/// Adds to `stats` the kernels one call of `fn` (a function of `module` with a body) runs: its
/// top-level loop nests, library calls and copies, and those of the module's functions it calls
/// (scope functions, LoweringOptions::share_repeated_scopes), once per call. `memo` holds the
/// counts of functions already visited.
void count_body(mlir::ModuleOp module, mlir::Operation* fn, CpuKernelStats& stats,
                std::map<mlir::Operation*, CpuKernelStats>& memo) {
  for (mlir::Operation& op : fn->getRegion(0).front()) {
    const llvm::StringRef name = op.getName().getStringRef();
    if (is_loop_nest(op, name, op.getName().getDialectNamespace())) {
      ++stats.loop_nests;
    } else if (auto call = mlir::dyn_cast<mlir::func::CallOp>(op)) {
      // An outlined kernel is the loop nest it holds; a defined function (a scope function) its
      // kernels; other calls are library kernels.
      mlir::Operation* callee = module.lookupSymbol(call.getCallee());
      if (callee != nullptr && callee->hasAttr(kKernelAttr)) {
        ++stats.loop_nests;
      } else if (callee != nullptr && callee->getNumRegions() == 1 && !callee->getRegion(0).empty()) {
        auto [it, added] = memo.try_emplace(callee);
        if (added) count_body(module, callee, it->second, memo);
        stats.loop_nests += it->second.loop_nests;
        stats.library_calls += it->second.library_calls;
        stats.copies += it->second.copies;
      } else {
        ++stats.library_calls;
      }
    } else if (name == "memref.copy") {
      ++stats.copies;
    }
  }
}

/// Bytes of a statically shaped memref (sub-byte elements rounded up), 0 for a dynamic one.
int64_t static_bytes(mlir::MemRefType type) {
  if (!type.hasStaticShape()) return 0;
  const mlir::Type element = type.getElementType();
  const int64_t bytes =
      element.isIndex() ? 8 : (element.isIntOrFloat() ? (element.getIntOrFloatBitWidth() + 7) / 8 : 16);
  return type.getNumElements() * bytes;
}

/// CpuKernelStats::peak_alloc_bytes of one call of `fn`: walks its top-level operations in order,
/// adding each memref.alloc and subtracting each memref.dealloc (of an allocation or a view of
/// one); a call of a defined function (a scope function) adds that function's own peak at the
/// call. `memo` holds the peaks of functions already visited.
int64_t peak_alloc_bytes(mlir::ModuleOp module, mlir::Operation* fn, std::map<mlir::Operation*, int64_t>& memo) {
  std::map<void*, int64_t> live;  // allocation (its Value's opaque pointer) -> bytes
  int64_t now = 0, peak = 0;
  for (mlir::Operation& op : fn->getRegion(0).front()) {
    if (auto alloc = mlir::dyn_cast<mlir::memref::AllocOp>(op)) {
      const int64_t bytes = static_bytes(alloc.getType());
      live[alloc.getResult().getAsOpaquePointer()] = bytes;
      now += bytes;
      peak = std::max(peak, now);
    } else if (auto dealloc = mlir::dyn_cast<mlir::memref::DeallocOp>(op)) {
      mlir::Value root = dealloc.getMemref();
      while (auto view = root.getDefiningOp<mlir::ViewLikeOpInterface>()) root = view.getViewSource();
      if (auto it = live.find(root.getAsOpaquePointer()); it != live.end()) {
        now -= it->second;
        live.erase(it);
      }
    } else if (auto call = mlir::dyn_cast<mlir::func::CallOp>(op)) {
      mlir::Operation* callee = module.lookupSymbol(call.getCallee());
      if (callee == nullptr || callee->getNumRegions() != 1 || callee->getRegion(0).empty()) continue;
      auto [it, added] = memo.try_emplace(callee, 0);
      if (added) it->second = peak_alloc_bytes(module, callee, memo);
      peak = std::max(peak, now + it->second);
    }
  }
  return peak;
}

/// The CpuKernelStats of function `entry` of `module`, or nullopt when the module has no
/// `func.func @entry` (after the lowering to LLVM).
std::optional<CpuKernelStats> count_kernels(mlir::ModuleOp module, const std::string& entry) {
  mlir::Operation* fn = module.lookupSymbol(entry);
  if (fn == nullptr || fn->getName().getStringRef() != "func.func" || fn->getNumRegions() != 1 ||
      fn->getRegion(0).empty()) {
    return std::nullopt;
  }
  CpuKernelStats stats;
  module.walk([&](mlir::func::FuncOp f) {
    stats.kernel_functions += f->hasAttr(kKernelAttr) ? 1 : 0;
    stats.scope_functions += f->hasAttr("ingot.scope_inputs") ? 1 : 0;
  });
  std::map<mlir::Operation*, CpuKernelStats> memo;
  count_body(module, fn, stats, memo);
  std::map<mlir::Operation*, int64_t> peaks;
  stats.peak_alloc_bytes = peak_alloc_bytes(module, fn, peaks);
  return stats;
}

/// The attribute kResultArgumentsAttr of function `entry` of `module` (ingot-drop-argument-results),
/// or nullopt when the function or the attribute is absent.
std::optional<std::vector<int64_t>> result_arguments(mlir::ModuleOp module, const std::string& entry) {
  mlir::Operation* fn = module.lookupSymbol(entry);
  auto attr = fn == nullptr ? nullptr : fn->getAttrOfType<mlir::DenseI64ArrayAttr>(kResultArgumentsAttr);
  if (!attr) return std::nullopt;
  return std::vector<int64_t>(attr.asArrayRef().begin(), attr.asArrayRef().end());
}

/// Checks the entry's result_arguments against the kernel's types: one entry per output, each an
/// input of the output's type or -1. Throws ingot::Error(kInvalidArgument) naming the result.
void check_result_arguments(const std::vector<int64_t>& pairs, const std::vector<std::pair<Shape, DType>>& in,
                            const std::vector<std::pair<Shape, DType>>& out) {
  if (pairs.empty()) return;
  if (pairs.size() != out.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the entry's {} lists {} results, the kernel has {} outputs", kResultArgumentsAttr,
                            pairs.size(), out.size()),
                "give compile_cpu the output types of the entry before the pipeline ran");
  }
  for (size_t r = 0; r < pairs.size(); ++r) {
    const int64_t a = pairs[r];
    if (a < -1 || a >= static_cast<int64_t>(in.size()) || (a >= 0 && in[static_cast<size_t>(a)] != out[r])) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("the entry's {} pairs result {} with argument {}, which is not an input of its type",
                              kResultArgumentsAttr, r, a),
                  "give compile_cpu the entry's input and output types");
    }
  }
}

/// Parses `text` and runs the stages, dumping after each when `dump_dir` is set; the module must be
/// all LLVM after `lower-to-llvm`. When `stats` is given it receives the kernel counts of
/// function `entry` after the last stage that leaves it a func.func (count_kernels), and
/// `pairs` the entry's result_arguments as the last stage that had them left them.
mlir::OwningOpRef<mlir::ModuleOp> parse_and_run(mlir::MLIRContext& ctx, const std::string& text,
                                                const std::vector<PipelineStage>& stages, const std::string& dump_dir,
                                                bool verify_each_pass, const std::string& entry = "",
                                                CpuKernelStats* stats = nullptr,
                                                std::vector<int64_t>* pairs = nullptr) {
  return detail::parse_and_run(ctx, text, stages, dump_dir, kDumpHint, verify_each_pass,
                               [&](const std::string& stage, mlir::ModuleOp module) {
                                 if (stage == "lower-to-llvm") check_all_llvm(module, dump_dir);
                                 if (stats == nullptr) return;
                                 if (std::optional<CpuKernelStats> s = count_kernels(module, entry)) *stats = *s;
                                 if (auto p = result_arguments(module, entry)) *pairs = std::move(*p);
                               });
}

/// A memref descriptor {allocated, aligned, offset, sizes[rank], strides[rank]} as int64 words.
std::vector<int64_t> descriptor(const Array& a) {
  const auto rank = static_cast<size_t>(a.rank());
  std::vector<int64_t> d(3 + 2 * rank);
  const auto ptr = reinterpret_cast<int64_t>(a.raw_data());
  d[0] = ptr;
  d[1] = ptr;
  d[2] = 0;
  const std::vector<int64_t> strides = row_major_strides(a.shape());
  for (size_t i = 0; i < rank; ++i) {
    d[3 + i] = a.shape()[i];
    d[3 + rank + i] = strides[i];
  }
  return d;
}

void check_types(const char* what, std::span<const Array> arrays, const std::vector<std::pair<Shape, DType>>& types) {
  if (arrays.size() != types.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("CpuKernel::run: {} {} given, the kernel takes {}", arrays.size(), what, types.size()));
  }
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (arrays[i].dtype() != types[i].second) {
      throw Error(ErrorCode::kDTypeMismatch,
                  fmt::format("CpuKernel::run: {} {} has dtype {}, the kernel takes {}", what, i,
                              dtype_name(arrays[i].dtype()), dtype_name(types[i].second)));
    }
    if (arrays[i].shape() != types[i].first) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("CpuKernel::run: {} {} has shape {}, the kernel takes {}", what, i,
                              shape_to_string(arrays[i].shape()), shape_to_string(types[i].first)));
    }
  }
}

class JitKernel final : public CpuKernel {
 public:
  /// `pairs`: the entry's result_arguments (checked by check_result_arguments), empty for none.
  JitKernel(std::unique_ptr<detail::LinkedObjects> code, void (*fn)(void**), std::string entry,
            std::vector<std::pair<Shape, DType>> in, std::vector<std::pair<Shape, DType>> out,
            std::vector<int64_t> pairs, CpuKernelStats stats, CpuCompileReport report)
      : code_(std::move(code)),
        fn_(fn),
        entry_(std::move(entry)),
        in_(std::move(in)),
        out_(std::move(out)),
        pairs_(std::move(pairs)),
        stats_(stats),
        report_(report) {}

  void run(std::span<const Array> inputs, std::span<Array> outputs) const override {
    check_types("input", inputs, in_);
    check_types("output", std::span<const Array>(outputs.data(), outputs.size()), out_);
    std::vector<std::vector<int64_t>> descs;
    descs.reserve(inputs.size() + outputs.size());
    for (const Array& a : inputs) descs.push_back(descriptor(a));
    // A result that is an argument has no out-param (ingot-drop-argument-results).
    for (size_t r = 0; r < outputs.size(); ++r) {
      if (pairs_.empty() || pairs_[r] < 0) descs.push_back(descriptor(outputs[r]));
    }
    // The packed interface takes a pointer to each argument; each argument of the C interface
    // is a pointer to a descriptor.
    std::vector<void*> desc_ptrs(descs.size());
    std::vector<void*> args(descs.size());
    for (size_t i = 0; i < descs.size(); ++i) {
      desc_ptrs[i] = descs[i].data();
      args[i] = &desc_ptrs[i];
    }
    reserve_working_memory();
    fn_(args.data());
    // Such a result is its argument's buffer (updated in place or unchanged): an output given as
    // another buffer receives a copy; the usual case (a donated parameter's update, whose output
    // is the parameter's own array: Executable) copies nothing.
    for (size_t r = 0; r < pairs_.size(); ++r) {
      if (pairs_[r] < 0) continue;
      const Array& from = inputs[static_cast<size_t>(pairs_[r])];
      if (from.nbytes() > 0 && outputs[r].raw_data() != from.raw_data()) {
        std::memcpy(outputs[r].raw_data(), from.raw_data(), static_cast<size_t>(from.nbytes()));
      }
    }
  }
  const std::vector<std::pair<Shape, DType>>& input_types() const override { return in_; }
  const std::vector<std::pair<Shape, DType>>& output_types() const override { return out_; }
  const CpuKernelStats& stats() const override { return stats_; }
  const CpuCompileReport& report() const override { return report_; }

 private:
  /// The compiled code does not check its allocations (a failed malloc would be written through):
  /// get the step's peak working memory once and give it back, so that a step that cannot have
  /// it fails here, before anything ran, instead of crashing part way.
  void reserve_working_memory() const {
    if (stats_.peak_alloc_bytes <= 0) return;
    void* probe = std::malloc(static_cast<size_t>(stats_.peak_alloc_bytes));
    if (probe == nullptr) {
      throw Error(ErrorCode::kOutOfMemory,
                  fmt::format("the compiled step '{}' needs {} bytes ({:.1f} MiB) of working memory for its "
                              "intermediate buffers and the allocation failed; nothing ran, every input and "
                              "donated buffer is as it was",
                              entry_, stats_.peak_alloc_bytes,
                              static_cast<double>(stats_.peak_alloc_bytes) / (1024.0 * 1024.0)),
                  "free memory or raise the process's limit (ulimit -v), or make the step smaller (a smaller "
                  "batch size or model)");
    }
    std::free(probe);
  }

  std::unique_ptr<detail::LinkedObjects> code_;  // owns the code fn_ points into
  void (*fn_)(void**);
  std::string entry_;
  std::vector<std::pair<Shape, DType>> in_, out_;
  std::vector<int64_t> pairs_;  // per output: the input it is, or -1 (an out-param)
  CpuKernelStats stats_;
  CpuCompileReport report_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// ingot's library kernels by name, for the JIT's symbol resolution.
std::vector<std::pair<std::string, void*>> library_symbols() { return kernels::cpu_kernel_symbols(); }

/// The objects of a cached step (manifest under `key`), or nullopt when any is missing or corrupt.
std::optional<std::pair<detail::StepManifest, std::vector<std::string>>> load_cached_step(CompileCache& cache,
                                                                                          const std::string& key) {
  std::optional<std::string> text = cache.load(key);
  if (!text) return std::nullopt;
  std::optional<detail::StepManifest> manifest = detail::StepManifest::parse(*text);
  if (!manifest) return std::nullopt;
  std::vector<std::string> objects;
  for (const std::string& object : manifest->objects) {
    std::optional<std::string> bytes = cache.load(object);
    if (!bytes) return std::nullopt;
    objects.push_back(std::move(*bytes));
  }
  return std::make_pair(std::move(*manifest), std::move(objects));
}

/// Appends each part's object key to `manifest.objects` (`parts`: whether it is the host part, and
/// the code it is keyed by: LLVM bitcode or MLIR bytecode; `lowering`: the text of the stages
/// still to run on MLIR code, empty for bitcode), sizes `objects` to the parts and fills
/// in those the cache holds (counted in report.cache_hits); returns the indices of the others.
std::vector<size_t> load_cached_objects(const std::vector<std::pair<bool, std::string_view>>& parts,
                                        std::string_view lowering, const detail::CacheContext& context,
                                        CompileCache& cache, detail::StepManifest& manifest, CpuCompileReport& report,
                                        std::vector<std::string>& objects) {
  objects.assign(parts.size(), std::string());
  std::vector<size_t> missing;
  for (size_t i = 0; i < parts.size(); ++i) {
    manifest.objects.push_back(detail::object_key(context, parts[i].first, parts[i].second, lowering));
    if (std::optional<std::string> cached = cache.enabled() ? cache.load(manifest.objects.back()) : std::nullopt) {
      objects[i] = std::move(*cached);
      ++report.cache_hits;
    } else {
      missing.push_back(i);
    }
  }
  return missing;
}

/// MLIR module (after the pipeline) -> LLVM IR -> parts -> objects, each from the cache or
/// compiled (in parallel) and stored. Fills `manifest`'s object keys and `report`'s LLVM figures.
std::vector<std::string> generate_objects(mlir::ModuleOp module, const std::string& entry,
                                          const CpuCompileOptions& options, const detail::CacheContext& context,
                                          CompileCache& cache, detail::StepManifest& manifest, CpuCompileReport& report,
                                          size_t num_stages) {
  DiagnosticCollector diags(*module.getContext());
  llvm::LLVMContext llvm_ctx;
  std::unique_ptr<llvm::Module> llvm_module = mlir::translateModuleToLLVMIR(module, llvm_ctx);
  if (!llvm_module) fail("translation to LLVM IR", diags.text(), options.dump_dir);
  if (!options.dump_dir.empty()) {
    std::string ll;
    llvm::raw_string_ostream os(ll);
    llvm_module->print(os, nullptr);
    write_file(std::filesystem::path(options.dump_dir) / fmt::format("{:02}-llvm.ll", static_cast<int>(num_stages) + 1),
               ll);
  }
  detail::add_packed_entry(*llvm_module, entry);
  const std::vector<detail::ModulePart> parts = detail::split_module(*llvm_module, kKernelPrefix);
  std::vector<std::pair<bool, std::string_view>> keyed;
  for (const detail::ModulePart& part : parts) keyed.emplace_back(part.host, part.bitcode);
  std::vector<std::string> objects;
  const std::vector<size_t> missing_at = load_cached_objects(keyed, "", context, cache, manifest, report, objects);
  std::vector<detail::ModulePart> missing;
  for (size_t i : missing_at) missing.push_back(parts[i]);
  std::vector<std::string> compiled = detail::compile_objects(
      missing, {.opt_level = options.opt_level, .threads = options.codegen_threads, .progress = options.progress});
  for (size_t j = 0; j < compiled.size(); ++j) {
    if (cache.writable()) cache.store(manifest.objects[missing_at[j]], compiled[j]);
    objects[missing_at[j]] = std::move(compiled[j]);
  }
  report.cache_misses = static_cast<int64_t>(missing.size());
  report.objects = static_cast<int64_t>(parts.size());
  return objects;
}

/// The split path of compile_cpu: `back` (the stages after `outline`) runs on each part of
/// split_mlir_module in its own MLIRContext, then translation to LLVM IR, optimisation and code
/// generation, `codegen_threads` parts at a time (all of it per part, so the stages after
/// outlining and the translation no longer run serially over the whole step). Each part's object
/// comes from the cache when its bytecode was compiled before with the same later stages (both
/// are in the key), so a hit skips its MLIR stages too. Fills `manifest`'s object keys and
/// `report`'s cache figures.
std::vector<std::string> lower_and_compile_parts(const std::vector<detail::MlirPart>& parts,
                                                 const std::vector<PipelineStage>& back, const std::string& entry,
                                                 const CpuCompileOptions& options, const detail::CacheContext& context,
                                                 CompileCache& cache, detail::StepManifest& manifest,
                                                 CpuCompileReport& report) {
  std::vector<std::pair<bool, std::string_view>> keyed;
  for (const detail::MlirPart& part : parts) keyed.emplace_back(part.host, part.bytecode);
  std::vector<std::string> objects;
  // The stages after `outline` still run on the parts: their text is part of each object's key.
  std::string lowering;
  for (const PipelineStage& stage : back) lowering += fmt::format("stage {}={};", stage.name, stage.pipeline);
  const std::vector<size_t> missing = load_cached_objects(keyed, lowering, context, cache, manifest, report, objects);
  const size_t threads = detail::parallel_threads(missing.size(), options.codegen_threads);
  std::vector<std::unique_ptr<mlir::MLIRContext>> contexts(threads);
  std::vector<std::unique_ptr<detail::ObjectCompiler>> compilers(threads);
  auto lower_part = [&](size_t j, size_t thread) {
    const size_t i = missing[j];
    if (!contexts[thread]) {
      // One thread uses it: no locking, and no thread pool of its own beside the codegen threads.
      contexts[thread] = std::make_unique<mlir::MLIRContext>(make_registry(), mlir::MLIRContext::Threading::DISABLED);
      compilers[thread] = std::make_unique<detail::ObjectCompiler>(options.opt_level);
    }
    mlir::MLIRContext& ctx = *contexts[thread];
    mlir::OwningOpRef<mlir::ModuleOp> module;
    try {
      module = detail::parse_and_run(ctx, parts[i].bytecode, back, "", kDumpHint, options.verify_each_pass,
                                     [](const std::string& stage, mlir::ModuleOp m) {
                                       if (stage == "lower-to-llvm") check_all_llvm(m, "");
                                     });
    } catch (const Error& e) {
      // Name the part: the stages after `outline` run on it alone (with dumps they run on the
      // whole module, whose dump files then show the same code).
      throw Error(e.code(), fmt::format("in the part '{}' (split after 'outline'): {}", parts[i].name, e.message()),
                  e.hint());
    }
    DiagnosticCollector diags(ctx);
    llvm::LLVMContext llvm_ctx;
    std::unique_ptr<llvm::Module> llvm_module = mlir::translateModuleToLLVMIR(*module, llvm_ctx, parts[i].name);
    if (!llvm_module) fail(fmt::format("translation to LLVM IR of '{}'", parts[i].name), diags.text(), "");
    if (i == 0) detail::add_packed_entry(*llvm_module, entry);
    objects[i] = compilers[thread]->compile(*llvm_module, parts[i].host, parts[i].name);
    if (cache.writable()) cache.store(manifest.objects[i], objects[i]);
  };
  detail::run_parallel(missing.size(), options.codegen_threads, lower_part, options.progress);
  report.cache_misses = static_cast<int64_t>(missing.size());
  report.objects = static_cast<int64_t>(parts.size());
  return objects;
}

/// Index of the stage named "outline" in `stages`, or stages.size().
size_t outline_stage(const std::vector<PipelineStage>& stages) {
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].name == "outline") return i;
  }
  return stages.size();
}

}  // namespace

std::string run_pipeline(const std::string& mlir_text, const std::vector<PipelineStage>& stages) {
  initialise_mlir_once();
  mlir::MLIRContext ctx(make_registry());
  return module_text(*parse_and_run(ctx, mlir_text, stages, "", /*verify_each_pass=*/true));
}

CompileInfo compile_info(const CpuKernel& kernel) {
  CompileInfo info;
  info.kernel_functions = kernel.stats().kernel_functions;
  info.scope_functions = kernel.stats().scope_functions;
  info.mlir_seconds = kernel.report().mlir_seconds;
  info.llvm_seconds = kernel.report().llvm_seconds;
  info.link_seconds = kernel.report().link_seconds;
  info.objects = kernel.report().objects;
  info.cache_hits = kernel.report().cache_hits;
  info.cache_misses = kernel.report().cache_misses;
  info.step_cache_hits = kernel.report().step_cache_hit ? 1 : 0;
  return info;
}

std::unique_ptr<CpuKernel> compile_cpu(const std::string& mlir_text, const std::string& entry,
                                       std::vector<std::pair<Shape, DType>> input_types,
                                       std::vector<std::pair<Shape, DType>> output_types,
                                       const CpuCompileOptions& options) {
  initialise_mlir_once();
  const auto start = std::chrono::steady_clock::now();
  // The OpenMP pool (compiled loops, oneDNN, im2col) gets its threads now, where a failure can
  // be handled: fewer threads than the hardware's when the process cannot start more (an
  // address-space or thread limit), instead of libomp aborting in the first parallel loop.
  const int pool = kernels::start_openmp_threads(resolve_threads(0));
  const int loop_threads = options.pipeline.empty() ? std::min(resolve_threads(options.num_threads), pool) : 0;
  const std::vector<PipelineStage> stages =
      options.pipeline.empty() ? default_cpu_pipeline(loop_threads, options.outline_kernels) : options.pipeline;
  const detail::CacheContext context = detail::cache_context(options, stages, entry);
  // A dump was asked for: compile (a cached step would write none).
  CompileCache cache(options.dump_dir.empty() ? options.compile_cache_dir : "", options.compile_cache_max_bytes);
  const std::string key = detail::step_key(context, mlir_text);
  CpuCompileReport report;
  detail::StepManifest manifest;
  std::vector<std::string> objects;
  if (auto cached = cache.enabled() ? load_cached_step(cache, key) : std::nullopt) {
    manifest = std::move(cached->first);
    objects = std::move(cached->second);
    report.step_cache_hit = true;
    report.objects = report.cache_hits = static_cast<int64_t>(objects.size());
  } else {
    // MLIR's thread pool (hardware-concurrency threads, started lazily by LLVM, which aborts with
    // "pthread_create failed" when one cannot start): only when they can all be had right now.
    const int hw = resolve_threads(0);
    auto ctx = std::make_unique<mlir::MLIRContext>(make_registry(), kernels::startable_threads(hw + 1) > hw
                                                                        ? mlir::MLIRContext::Threading::ENABLED
                                                                        : mlir::MLIRContext::Threading::DISABLED);
    // With an `outline` stage (the default pipeline) and no dumps, the stages after it run per
    // part inside the parallel code generation; dumps show the whole module after every stage,
    // so they take the serial path (same code: each kernel is lowered alone either way).
    const size_t outline = outline_stage(stages);
    if (outline < stages.size() && options.dump_dir.empty()) {
      const std::vector<PipelineStage> front(stages.begin(), stages.begin() + static_cast<std::ptrdiff_t>(outline) + 1);
      const std::vector<PipelineStage> back(stages.begin() + static_cast<std::ptrdiff_t>(outline) + 1, stages.end());
      mlir::OwningOpRef<mlir::ModuleOp> module = parse_and_run(*ctx, mlir_text, front, "", options.verify_each_pass);
      if (std::optional<CpuKernelStats> s = count_kernels(*module, entry)) manifest.stats = *s;
      if (auto p = result_arguments(*module, entry)) manifest.result_arguments = std::move(*p);
      const std::vector<detail::MlirPart> parts = detail::split_mlir_module(*module);
      report.mlir_seconds = seconds_since(start);
      const auto llvm_start = std::chrono::steady_clock::now();
      objects = lower_and_compile_parts(parts, back, entry, options, context, cache, manifest, report);
      report.llvm_seconds = seconds_since(llvm_start);
    } else {
      mlir::OwningOpRef<mlir::ModuleOp> module =
          parse_and_run(*ctx, mlir_text, stages, options.dump_dir, options.verify_each_pass, entry, &manifest.stats,
                        &manifest.result_arguments);
      report.mlir_seconds = seconds_since(start);
      const auto llvm_start = std::chrono::steady_clock::now();
      objects = generate_objects(*module, entry, options, context, cache, manifest, report, stages.size());
      report.llvm_seconds = seconds_since(llvm_start);
    }
    if (cache.writable()) {
      cache.store(key, manifest.serialize());
      cache.evict();
    }
  }
  const auto link_start = std::chrono::steady_clock::now();
  std::unique_ptr<detail::LinkedObjects> code;
  void (*fn)(void**) = nullptr;
  try {
    code = detail::LinkedObjects::link(objects, library_symbols(), options.runtime_libraries, options.perf_jitdump);
    fn = reinterpret_cast<void (*)(void**)>(code->lookup("ingot_packed_" + entry));
  } catch (const Error& e) {
    if (!report.step_cache_hit) throw;
    // Entries that pass their checksums but do not link (written by a damaged or foreign tool):
    // compile without the cache, whose fresh entries then replace them.
    std::cerr << fmt::format(
        "ingot: warning: compile cache '{}': the cached step {} does not link ({}); "
        "recompiling\n",
        cache.dir(), key, e.message());
    CpuCompileOptions fresh = options;
    fresh.compile_cache_dir = "";
    std::unique_ptr<CpuKernel> kernel =
        compile_cpu(mlir_text, entry, std::move(input_types), std::move(output_types), fresh);
    if (cache.writable()) {
      // Forget the broken step and its objects: the next compile with the cache stores them anew.
      std::error_code ec;
      std::filesystem::remove(cache.entry_path(key), ec);
      for (const std::string& object : manifest.objects) std::filesystem::remove(cache.entry_path(object), ec);
    }
    return kernel;
  }
  report.link_seconds = seconds_since(link_start);
  check_result_arguments(manifest.result_arguments, input_types, output_types);
  return std::make_unique<JitKernel>(std::move(code), fn, entry, std::move(input_types), std::move(output_types),
                                     std::move(manifest.result_arguments), manifest.stats, report);
}

}  // namespace ingot::codegen
