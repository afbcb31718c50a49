// Lowering of the graph IR to MLIR (func + linalg + tensor + arith + math), as text.
//
// Each op's registry entry has a LowerRule that appends MLIR for one node through a
// LoweringContext. The module is emitted as text so that only the back end (codegen/cpu) needs the
// heavy MLIR headers, and so that every stage can be dumped and replayed with mlir-opt-22.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ingot/ir/graph.h"

namespace ingot::lower {

/// Builds the region body of a linalg.generic: SSA names and lines of scalar code.
class BodyBuilder {
 public:
  explicit BodyBuilder(int64_t* counter) : counter_(counter) {}
  /// A fresh SSA name "%b<N>".
  std::string fresh();
  /// Appends one line (without indentation).
  void emit(const std::string& line) { lines_.push_back(line); }
  /// Emits `%n = <rhs>` with a fresh name and returns the name.
  std::string let(const std::string& rhs);
  /// A scalar constant of `dtype` ("arith.constant 1.0 : f32"; bools as i1).
  std::string constant(double value, DType dtype);
  /// The `linalg.index` of loop dimension `d`, as an index value.
  std::string index(int64_t d);
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  int64_t* counter_;
  std::vector<std::string> lines_;
};

/// One input of a linalg.generic: SSA name, tensor type and its affine-map results (one
/// expression per operand dimension over the loop dims d0, d1, ...).
struct GenericInput {
  std::string value;
  ir::TensorType type;
  std::vector<std::string> map;
};

/// Choices of the lowering (what the compiler benchmarks decide between).
struct LoweringOptions {
  /// Plain 2-D f32/f64 dot_generals (matrix products, either operand possibly transposed) call a
  /// GEMM library (oneDNN for f32, OpenBLAS for f64; kernels/cpu/gemm.cpp) instead of a generated
  /// loop nest. The generated code stays selectable for research: bench/ measures both.
  bool blas_gemm = true;
  /// The GEMM function those products call: `<gemm_function>_<f32|f64>(A, B, C, trans_a, trans_b)`
  /// on row-major 2-D memrefs, C = op(A) op(B) with op the transpose where the flag is 1.
  /// "ingot_cpu_gemm" (oneDNN / OpenBLAS, kernels/cpu/gemm.cpp) for the CPU; the CUDA code
  /// generator uses "ingot_cuda_gemm", which its host plan turns into a cuBLAS call; with it f16
  /// and bf16 products call `ingot_cuda_gemm[_batched]_<f16|bf16>` too (cublasGemmEx, f32 compute,
  /// the result rounded once, as the interpreter accumulates them).
  std::string gemm_function = "ingot_cpu_gemm";
  /// Convolutions with f32/f64 operands and a reduction length K (kernel taps x input features
  /// per group) of at least `library_conv_min_k` call the im2col + GEMM kernel
  /// (kernels/cpu/conv.cpp) instead of a generated loop nest; other dtypes always get the loops.
  /// The loops stay selectable: bench/compiler_bench measures both (docs/compiler.md).
  bool library_conv = true;
  /// Below this K the generated loops are faster (LLVM unrolls and vectorises the short sum):
  /// bench/compiler_bench's `conv` section measured loops 1.6-2.6x faster for K <= 45 and the
  /// library 4-36x faster from K = 48 (f32, 2 cores). 0: every f32/f64 convolution calls the
  /// library. Negative: lower_graph throws ingot::Error(kInvalidArgument).
  int64_t library_conv_min_k = 48;
  /// The convolution function those calls name: `<conv_function>_<f32|f64>(lhs, rhs, result,
  /// config)` on 1-D memrefs of the operands' row-major layouts and the i64 encoded ConvSpec
  /// (kernels::encode_conv_spec). "ingot_cpu_conv" (im2col + BLAS, kernels/cpu/conv.cpp) for the
  /// CPU; the CUDA code generator uses "ingot_cuda_conv", which its host plan turns into a
  /// convolution thunk (CudaThunk::Kind::kConv).
  std::string conv_function = "ingot_cpu_conv";
  /// Regional compilation (torch.compile's compile of a repeated nn.Module once; JAX's scan over
  /// layers): repeated name scopes whose nodes are the same computation up to the values they are
  /// given (the blocks of a transformer, forward and backward: ir::Node::scope, which layers and
  /// autodiff set) are lowered as one private function, `@ingot_scope_<k>`, called once per
  /// instance, so the MLIR passes and the code generator see one block instead of N. Constants
  /// are recomputed in each function that uses them. Results are the same as lowering the graph
  /// flat (bitwise: the same ops in the same order; only fusion across an instance's boundary is
  /// lost). When the calls of some group cannot be ordered (an instance that needs a value computed
  /// from its own output), the whole graph is lowered flat. The CUDA code generator lowers flat
  /// (its plan has no calls).
  bool share_repeated_scopes = true;
  /// Scatter-adds (computation "add") of f32, f64, i32 or i64 are lowered as one parallel loop
  /// over the update elements, each adding its element with `memref.atomic_rmw` into a copy of
  /// the operand, instead of one serial loop in row-major order: the CUDA code generator sets it
  /// (one thread per update element rather than a one-thread kernel: embedding gradients). The
  /// float sums' order is then unspecified, so results may differ from the interpreter's by
  /// rounding where several updates hit one element (integers are exact). f16/bf16 and
  /// assigning scatters keep the serial loop (their order matters).
  bool atomic_scatter = false;
};

/// State of lowering one graph: SSA names of values and the function body being written.
class LoweringContext {
 public:
  explicit LoweringContext(const ir::Graph& graph, LoweringOptions options = {}) : graph_(graph), options_(options) {}
  const LoweringOptions& options() const { return options_; }
  /// Adds a module-level declaration (e.g. `func.func private @f(...)`) once.
  void declare(const std::string& declaration);
  const std::vector<std::string>& declarations() const { return declarations_; }
  const ir::Graph& graph() const { return graph_; }

  /// SSA name of value `v` (bound when its producer was lowered).
  const std::string& value(ir::ValueId v) const;
  /// SSA name of operand `i` of `node`.
  const std::string& operand(const ir::Node& node, size_t i) const { return value(node.inputs.at(i)); }
  void bind(ir::ValueId v, std::string ssa);
  /// Whether value `v` has been bound (its producer lowered, or it is a bound parameter).
  /// False for an id outside the graph.
  bool bound(ir::ValueId v) const {
    return v >= 0 && static_cast<size_t>(v) < names_.size() && !names_[static_cast<size_t>(v)].empty();
  }
  /// A fresh SSA name "%<hint><N>".
  std::string fresh(const std::string& hint = "t");
  /// Appends one line of the function body (indented by the context).
  void emit(const std::string& line);
  /// Emits `%n = <rhs>` with a fresh name and returns it.
  std::string let(const std::string& rhs, const std::string& hint = "t");
  /// The buffer of `tensor` (of `tensor_type`) for a library call emitted right after it:
  /// `bufferization.to_buffer ... read_only` to `memref_type`, tagged with a unique `ingot.read`
  /// attribute. The tag keeps CSE from merging two reads of one tensor by two calls: a merged read
  /// would end the tensor's live range at the first call, and one-shot bufferization could then
  /// reuse its buffer for a result computed before the second call (a float32 model fed f64 data
  /// got x's buffer overwritten by the loss gradient before the weight gradient's GEMM read x).
  std::string library_read(const std::string& tensor, const std::string& tensor_type, const std::string& memref_type);

  /// "tensor<2x3xf32>", "tensor<f32>" for a scalar; bool tensors are tensor<...xi8> (one byte per
  /// element, as ingot::Array stores them; i1 vectors would be bit-packed in memory).
  static std::string type(const ir::TensorType& t);
  /// Storage element type in tensors: element(d), except i8 for bool.
  static std::string storage(DType d);
  /// MLIR element type: f32, f64, f16, bf16, i1 (bool), i8/i32/i64 (signed and unsigned: MLIR
  /// integers are signless; ops choose the signedness).
  static std::string element(DType d);
  /// "affine_map<(d0, d1) -> (d1)>" for `rank` loop dims and the result expressions.
  static std::string affine_map(int64_t loop_rank, const std::vector<std::string>& exprs);
  /// The identity expressions d0..d{rank-1}.
  static std::vector<std::string> identity(int64_t rank);

  /// `tensor.empty() : type`; returns its name.
  std::string empty(const ir::TensorType& t);
  /// A tensor of type `t` filled with the scalar SSA value `scalar` (linalg.fill).
  std::string fill(const ir::TensorType& t, double value);
  /// Emits a linalg.generic with `loop_rank` loops (block arguments of bool operands are i1,
  /// converted from their i8 storage) of `iterators` ("parallel"/"reduction"),
  /// inputs `ins`, and one output of type `out` (initialised from `init`, or tensor.empty when
  /// `init` is empty) mapped by `out_map`. `body` receives the block arguments (inputs..., then
  /// the output's current value) and returns the SSA name to yield. Returns the result name.
  std::string generic(int64_t loop_rank, const std::vector<std::string>& iterators,
                      const std::vector<GenericInput>& ins, const ir::TensorType& out,
                      const std::vector<std::string>& out_map, const std::string& init,
                      const std::function<std::string(BodyBuilder&, const std::vector<std::string>&)>& body);
  /// An elementwise map over operands of identical shape (all parallel, identity maps).
  std::string map(const std::vector<std::string>& operands, const std::vector<ir::TensorType>& types,
                  const ir::TensorType& out,
                  const std::function<std::string(BodyBuilder&, const std::vector<std::string>&)>& body);

  const std::vector<std::string>& lines() const { return lines_; }

 private:
  const ir::Graph& graph_;
  LoweringOptions options_;
  std::vector<std::string> declarations_;
  std::vector<std::string> names_ = std::vector<std::string>(static_cast<size_t>(graph_.num_values()));
  std::vector<std::string> lines_;
  int64_t counter_ = 0;
};

/// A graph lowered to MLIR text.
struct LoweredModule {
  std::string text;                    ///< the module
  std::vector<ir::TensorType> params;  ///< the function's arguments (the graph's parameters)
  /// The function's results: the graph's outputs with repeats removed (a value returned twice
  /// would make two out-params alias one buffer).
  std::vector<ir::TensorType> results;
  /// For each graph output, the index of the function result holding it.
  std::vector<size_t> result_of_output;
  /// LoweringOptions::share_repeated_scopes: the functions made of repeated scopes and how many
  /// calls of them the entry makes (0 and 0 when lowered flat).
  int64_t scope_functions = 0;
  int64_t scope_calls = 0;
};

/// Lowers `graph` to an MLIR module holding `func.func @<entry>(parameters) -> (results)` over
/// tensors, with llvm.emit_c_interface. Throws ingot::Error(kUnimplemented) "no lowering for op
/// 'X'" naming the op when one has no lowering rule.
///
/// `donated` lists (parameter index, output index) pairs of equal type whose output is computed
/// into the parameter's buffer (bufferization.materialize_in_destination; in place when the
/// bufferization analysis finds it safe, else through a copy): the caller passes the donated
/// buffer as that output's buffer too.
LoweredModule lower_graph(const ir::Graph& graph, const std::string& entry = "main",
                          const std::vector<std::pair<size_t, size_t>>& donated = {},
                          const LoweringOptions& options = {});

/// lower_graph(graph, entry).text.
std::string lower_to_mlir(const ir::Graph& graph, const std::string& entry = "main");

}  // namespace ingot::lower
