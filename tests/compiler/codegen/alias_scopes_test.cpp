// Noalias kernel buffers (docs/compiler.md, "Kernel outlining and dedupe"): ingot-outline-kernels
// marks a kernel's buffers `llvm.noalias` only where no other buffer of the call can overlap
// them, and ingot-noalias-scopes turns the marks into alias scopes that survive OpenMP outlining.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "ingot/codegen/cpu_compiler.h"
#include "parity.h"
#include "test_util.h"

namespace ingot {
namespace {

/// Five loop nests over two parameters and two allocations; the comments say which buffers may
/// overlap another buffer of the same nest.
constexpr const char* kNests = R"mlir(
func.func @f(%p: memref<8xf32>, %q: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %a = memref.alloc() : memref<8xf32>
  %b = memref.alloc() : memref<8xf32>
  // A parameter and an allocation: both noalias.
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %p[%i] : memref<8xf32>
    %y = arith.negf %x : f32
    memref.store %y, %a[%i] : memref<8xf32>
  }
  // Two allocations: both noalias.
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %b[%i] : memref<8xf32>
  }
  // Two views of %b (may overlap: neither) and %a (noalias).
  %lo = memref.subview %b[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %hi = memref.subview %b[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %lo[%i] : memref<4xf32, strided<[1]>>
    memref.store %x, %hi[%i] : memref<4xf32, strided<[1], offset: 4>>
    memref.store %x, %a[%i] : memref<8xf32>
  }
  // Two parameters (one buffer when a donated parameter is also the output): neither.
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %p[%i] : memref<8xf32>
    %y = arith.mulf %x, %x : f32
    memref.store %y, %q[%i] : memref<8xf32>
  }
  // A buffer of unknown origin (a call's result): no mark on any buffer of the nest.
  %u = func.call @make() : () -> memref<8xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %u[%i] : memref<8xf32>
    %y = arith.subf %x, %x : f32
    memref.store %y, %a[%i] : memref<8xf32>
  }
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %b : memref<8xf32>
  return
}
func.func private @make() -> memref<8xf32>
)mlir";

/// The kernels' signatures (`func.func @ingot_k_...` lines) whose body contains `op`.
std::string kernel_with(const std::string& module, const std::string& op) {
  for (size_t at = module.find("func.func @ingot_k_"); at != std::string::npos;
       at = module.find("func.func @ingot_k_", at + 1)) {
    const size_t end = module.find("\n  }", at);
    const std::string body = module.substr(at, end - at);
    if (body.find(op) != std::string::npos) return body.substr(0, body.find('\n'));
  }
  return "";
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(NoAliasKernels, OnlyBuffersNoOtherBufferOfTheCallReachesAreMarked) {
  const std::string out = codegen::run_pipeline(kNests, {{"outline", "ingot-outline-kernels"}});
  EXPECT_EQ(count(kernel_with(out, "arith.negf"), "llvm.noalias"), 2) << out;
  EXPECT_EQ(count(kernel_with(out, "arith.addf"), "llvm.noalias"), 2) << out;
  const std::string views = kernel_with(out, "offset: 4");
  EXPECT_EQ(count(views, "llvm.noalias"), 1) << out;
  EXPECT_NE(views.find("memref<8xf32> {llvm.noalias}"), std::string::npos) << views;
  EXPECT_EQ(count(kernel_with(out, "arith.mulf"), "llvm.noalias"), 0) << out;
  EXPECT_EQ(count(kernel_with(out, "arith.subf"), "llvm.noalias"), 0) << out;
}

TEST(NoAliasKernels, CallsThatMayOverlapGetAKernelOfTheirOwn) {
  // The same nest twice: over two allocations (noalias) and over two parameters (not).
  const std::string text = R"mlir(
func.func @f(%p: memref<8xf32>, %q: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %a = memref.alloc() : memref<8xf32>
  %b = memref.alloc() : memref<8xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    memref.store %x, %b[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %p[%i] : memref<8xf32>
    memref.store %x, %q[%i] : memref<8xf32>
  }
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %b : memref<8xf32>
  return
}
)mlir";
  const std::string out = codegen::run_pipeline(text, {{"outline", "ingot-outline-kernels"}});
  EXPECT_EQ(count(out, "func.func @ingot_k_"), 2) << out;
  EXPECT_EQ(count(out, "llvm.noalias"), 2) << out;
}

TEST(NoAliasKernels, ScopesTagTheAccessesOfNoaliasArguments) {
  const std::string out = codegen::run_pipeline(
      kNests, {{"outline", "ingot-outline-kernels"},
               {"lower",
                "convert-scf-to-cf,expand-strided-metadata,convert-to-llvm,reconcile-unrealized-casts,"
                "llvm.func(ingot-noalias-scopes)"}});
  // One scope per noalias argument: 2 + 2 + 1 (the parameter-only and unknown-origin kernels
  // have none).
  EXPECT_EQ(count(out, "= #llvm.alias_scope<"), 5) << out;
  // In the kernel of two views and %a: the store to %a is in %a's scope, the load and the store
  // through the views are not in it but are declared not to alias it.
  std::smatch m;
  const std::regex views_kernel(
      R"(llvm\.func @(ingot_k_[0-9a-f]+)\(%arg0: !llvm\.ptr, %arg1: !llvm\.ptr, %arg2: !llvm\.ptr \{llvm\.noalias\}\))");
  ASSERT_TRUE(std::regex_search(out, m, views_kernel)) << out;
  const size_t begin = out.find(m[0].str());
  const std::string body = out.substr(begin, out.find("\n  }", begin) - begin);
  EXPECT_EQ(count(body, "llvm.load"), 1) << body;
  EXPECT_EQ(count(body, "llvm.store"), 2) << body;
  EXPECT_EQ(count(body, "{noalias_scopes = ["), 2) << body;
  EXPECT_EQ(count(body, "{alias_scopes = ["), 1) << body;
  // The parameter-only kernel's accesses carry nothing.
  const std::regex plain_kernel(R"(llvm\.func @(ingot_k_[0-9a-f]+)\(%arg0: !llvm\.ptr, %arg1: !llvm\.ptr\))");
  ASSERT_TRUE(std::regex_search(out, m, plain_kernel)) << out;
  const size_t p = out.find(m[0].str());
  const std::string plain = out.substr(p, out.find("\n  }", p) - p);
  EXPECT_EQ(count(plain, "alias_scopes"), 0) << plain;
}

// out[0] = in[0], out[i] = out[i-1] + 1: the nest reads @state through its own get_global and
// writes it through the buffer it is given.
constexpr const char* kGlobalInsideTheNest = R"mlir(
module {
  memref.global "private" @state : memref<1024xf32> = uninitialized
  func.func @main(%in: memref<1024xf32>, %out: memref<1024xf32>) attributes {llvm.emit_c_interface} {
    %c1 = arith.constant 1 : index
    %n = arith.constant 1024 : index
    %one = arith.constant 1.0 : f32
    %g = memref.get_global @state : memref<1024xf32>
    memref.copy %in, %g : memref<1024xf32> to memref<1024xf32>
    scf.for %i = %c1 to %n step %c1 {
      %s = memref.get_global @state : memref<1024xf32>
      %im1 = arith.subi %i, %c1 : index
      %v = memref.load %s[%im1] : memref<1024xf32>
      %w = arith.addf %v, %one : f32
      memref.store %w, %g[%i] : memref<1024xf32>
    }
    memref.copy %g, %out : memref<1024xf32> to memref<1024xf32>
    return
  }
}
)mlir";

// The same recurrence in a helper whose parameter is @state (the caller passes it) and which
// writes @state through its own get_global: the parameter and the global are one buffer.
constexpr const char* kParameterIsTheGlobal = R"mlir(
module {
  memref.global "private" @state : memref<1024xf32> = uninitialized
  func.func private @helper(%p: memref<1024xf32>) {
    %c1 = arith.constant 1 : index
    %n = arith.constant 1024 : index
    %one = arith.constant 1.0 : f32
    %g = memref.get_global @state : memref<1024xf32>
    scf.for %i = %c1 to %n step %c1 {
      %im1 = arith.subi %i, %c1 : index
      %v = memref.load %p[%im1] : memref<1024xf32>
      %w = arith.addf %v, %one : f32
      memref.store %w, %g[%i] : memref<1024xf32>
    }
    return
  }
  func.func @main(%in: memref<1024xf32>, %out: memref<1024xf32>) attributes {llvm.emit_c_interface} {
    %g = memref.get_global @state : memref<1024xf32>
    memref.copy %in, %g : memref<1024xf32> to memref<1024xf32>
    func.call @helper(%g) : (memref<1024xf32>) -> ()
    memref.copy %g, %out : memref<1024xf32> to memref<1024xf32>
    return
  }
}
)mlir";

/// `text` compiled from `deallocate` on, with or without outlining, run on in[i] = 100 i.
std::vector<float> run_1024(const char* text, bool outline) {
  std::vector<codegen::PipelineStage> stages;
  for (const codegen::PipelineStage& stage : codegen::default_cpu_pipeline(1, outline)) {
    if (stage.name == "deallocate" || !stages.empty()) stages.push_back(stage);
  }
  codegen::CpuCompileOptions o;
  o.compile_cache_dir = "";
  o.outline_kernels = outline;
  o.pipeline = stages;
  auto kernel = codegen::compile_cpu(text, "main", {{{1024}, DType::kF32}}, {{{1024}, DType::kF32}}, o);
  std::vector<float> input(1024);
  for (size_t i = 0; i < input.size(); ++i) input[i] = 100.0f * static_cast<float>(i);
  std::vector<Array> in = {Array::from_vector<float>(input, {1024})};
  std::vector<Array> out = {Array::full({1024}, -1, DType::kF32)};
  kernel->run(in, out);
  return out[0].to_vector<float>();
}

/// 0, 1, 2, ...: what both recurrences compute.
std::vector<float> counting() {
  std::vector<float> e(1024);
  for (size_t i = 0; i < e.size(); ++i) e[i] = static_cast<float>(i);
  return e;
}

TEST(NoAliasKernels, AGlobalTheNestReadsItselfMarksNothing) {
  // Without the check the buffer given for @state was noalias, and LLVM vectorised the recurrence.
  EXPECT_EQ(run_1024(kGlobalInsideTheNest, false), counting());
  EXPECT_EQ(run_1024(kGlobalInsideTheNest, true), counting());
  const std::string out = codegen::run_pipeline(kGlobalInsideTheNest, {{"outline", "ingot-outline-kernels"}});
  EXPECT_EQ(count(out, "llvm.noalias"), 0) << out;
}

TEST(NoAliasKernels, AParameterMayBeAWritableGlobal) {
  // @helper's parameter is @state: they are one class, so neither buffer is marked (it was: the
  // outlined step computed 0, 1, 101, 201, ...).
  EXPECT_EQ(run_1024(kParameterIsTheGlobal, false), counting());
  EXPECT_EQ(run_1024(kParameterIsTheGlobal, true), counting());
  const std::string out = codegen::run_pipeline(kParameterIsTheGlobal, {{"outline", "ingot-outline-kernels"}});
  EXPECT_EQ(count(out, "llvm.noalias"), 0) << out;
}

TEST(NoAliasKernels, NestsThatCanReachMemoryAnotherWayMarkNothing) {
  // A call inside the nest, a pointer built from an integer, and a buffer of buffers: each could
  // reach %a's memory without going through the argument.
  const std::string text = R"mlir(
func.func private @touch(%x: f32)
func.func @f(%p: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %a = memref.alloc() : memref<8xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    func.call @touch(%x) : (f32) -> ()
    memref.store %x, %p[%i] : memref<8xf32>
  }
  %ai = memref.extract_aligned_pointer_as_index %a : memref<8xf32> -> index
  %i64 = arith.index_cast %ai : index to i64
  %ptr = llvm.inttoptr %i64 : i64 to !llvm.ptr
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    %ii = arith.index_cast %i : index to i64
    %q = llvm.getelementptr %ptr[%ii] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %x, %q : f32, !llvm.ptr
    memref.store %x, %p[%i] : memref<8xf32>
  }
  %h = memref.alloc() : memref<1xmemref<8xf32>>
  memref.store %a, %h[%c0] : memref<1xmemref<8xf32>>
  scf.for %i = %c0 to %c8 step %c1 {
    %aa = memref.load %h[%c0] : memref<1xmemref<8xf32>>
    %x = memref.load %a[%i] : memref<8xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %aa[%i] : memref<8xf32>
  }
  memref.dealloc %a : memref<8xf32>
  return
}
)mlir";
  const std::string out = codegen::run_pipeline(text, {{"outline", "ingot-outline-kernels"}});
  EXPECT_EQ(count(out, "func.func @ingot_k_"), 3) << out;
  EXPECT_EQ(count(out, "llvm.noalias"), 0) << out;
}

/// out = exp(in) + 1 through a temporary over 512 x 1024 floats (enough work for two threads, so
/// the nests become OpenMP loops), at the buffer level the default stages from `outline` take.
constexpr const char* kExpPlusOne = R"mlir(
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%in: memref<512x1024xf32>, %out: memref<512x1024xf32>) attributes {llvm.emit_c_interface} {
  %one = arith.constant 1.0 : f32
  %t = memref.alloc() {alignment = 64 : i64} : memref<512x1024xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%in : memref<512x1024xf32>) outs(%t : memref<512x1024xf32>) {
  ^bb0(%x: f32, %o: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<512x1024xf32>) outs(%out : memref<512x1024xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %one : f32
    linalg.yield %s : f32
  }
  memref.dealloc %t : memref<512x1024xf32>
  return
}
)mlir";

TEST(NoAliasKernels, OpenMpLoopBodiesKeepTheScopesAndComputeTheSame) {
  std::vector<codegen::PipelineStage> stages;
  for (const codegen::PipelineStage& stage : codegen::default_cpu_pipeline(2)) {
    if (stage.name == "outline" || !stages.empty()) stages.push_back(stage);
  }
  const auto dir = std::filesystem::temp_directory_path() / "ingot_alias_scopes_test";
  std::filesystem::remove_all(dir);
  const std::vector<float> input = testing::random_array(Shape{512, 1024}, DType::kF32, 5).to_vector<float>();
  for (const std::string& dump : {std::string(), dir.string()}) {
    codegen::CpuCompileOptions o;
    o.compile_cache_dir = "";
    o.pipeline = stages;
    o.dump_dir = dump;
    auto kernel =
        codegen::compile_cpu(kExpPlusOne, "main", {{{512, 1024}, DType::kF32}}, {{{512, 1024}, DType::kF32}}, o);
    std::vector<Array> in = {Array::from_vector<float>(input, {512, 1024})};
    std::vector<Array> out = {Array::full({512, 1024}, -1, DType::kF32)};
    kernel->run(in, out);
    const std::vector<float> got = out[0].to_vector<float>();
    for (size_t i = 0; i < got.size(); i += 997) {
      ASSERT_NEAR(got[i], std::exp(input[i]) + 1.0f, 1e-5f * (std::exp(input[i]) + 1.0f)) << "element " << i;
    }
  }
  // The translated module (dumped on the whole-module path): the loop bodies OpenMP outlined
  // into `..omp_par` functions load and store with alias scope metadata.
  std::string ll;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().string().ends_with("-llvm.ll")) {
      std::ifstream f(entry.path());
      std::stringstream s;
      s << f.rdbuf();
      ll = s.str();
    }
  }
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(ll.empty());
  int omp_bodies_with_scopes = 0;
  for (size_t at = ll.find("..omp_par("); at != std::string::npos; at = ll.find("..omp_par(", at + 1)) {
    const size_t begin = ll.rfind("define ", at);
    if (begin == std::string::npos || ll.find('\n', begin) < at) continue;  // a call, not a definition
    const std::string body = ll.substr(begin, ll.find("\n}", begin) - begin);
    if (body.find("store float") == std::string::npos) continue;
    EXPECT_NE(body.find("!alias.scope"), std::string::npos) << body;
    EXPECT_NE(body.find("!noalias"), std::string::npos) << body;
    ++omp_bodies_with_scopes;
  }
  EXPECT_EQ(omp_bodies_with_scopes, 2) << ll;
}

}  // namespace
}  // namespace ingot
