#include "ingot/lower/lowering.h"

#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <queue>
#include <set>

#include "ingot/ir/op_registry.h"
#include "lower/scopes.h"

namespace ingot::lower {

std::string BodyBuilder::fresh() { return fmt::format("%b{}", (*counter_)++); }

std::string BodyBuilder::let(const std::string& rhs) {
  std::string n = fresh();
  emit(fmt::format("{} = {}", n, rhs));
  return n;
}

namespace {

/// A float literal MLIR parses back exactly: hex bit pattern for non-finite values (and always
/// for the half types), shortest round-trip decimal otherwise.
std::string float_literal(double value, DType dtype) {
  auto hex = [](uint64_t bits, int width) { return fmt::format("0x{:0{}X}", bits, width); };
  switch (dtype) {
    case DType::kF16:
      return hex(float_to_half_bits(static_cast<float>(value)), 4);
    case DType::kBF16:
      return hex(float_to_bf16_bits(static_cast<float>(value)), 4);
    case DType::kF32: {
      float f = static_cast<float>(value);
      uint32_t bits = 0;
      std::memcpy(&bits, &f, 4);
      return hex(bits, 8);
    }
    default: {
      uint64_t bits = 0;
      std::memcpy(&bits, &value, 8);
      return hex(bits, 16);
    }
  }
}

}  // namespace

std::string BodyBuilder::constant(double value, DType dtype) {
  const std::string ty = LoweringContext::element(dtype);
  if (is_bool(dtype)) return let(fmt::format("arith.constant {}", value != 0 ? "true" : "false"));
  if (is_floating(dtype)) return let(fmt::format("arith.constant {} : {}", float_literal(value, dtype), ty));
  return let(fmt::format("arith.constant {} : {}", static_cast<int64_t>(value), ty));
}

std::string BodyBuilder::index(int64_t d) { return let(fmt::format("linalg.index {} : index", d)); }

const std::string& LoweringContext::value(ir::ValueId v) const {
  const std::string& n = names_.at(static_cast<size_t>(v));
  if (n.empty()) {
    throw Error(ErrorCode::kInternal, fmt::format("lowering: value %{} used before it was lowered", v));
  }
  return n;
}

void LoweringContext::bind(ir::ValueId v, std::string ssa) { names_.at(static_cast<size_t>(v)) = std::move(ssa); }

std::string LoweringContext::fresh(const std::string& hint) { return fmt::format("%{}{}", hint, counter_++); }

void LoweringContext::emit(const std::string& line) { lines_.push_back("    " + line); }

std::string LoweringContext::let(const std::string& rhs, const std::string& hint) {
  std::string n = fresh(hint);
  emit(fmt::format("{} = {}", n, rhs));
  return n;
}

std::string LoweringContext::library_read(const std::string& tensor, const std::string& tensor_type,
                                          const std::string& memref_type) {
  const std::string n = fresh("m");
  emit(fmt::format("{} = bufferization.to_buffer {} read_only {{ingot.read = \"{}\"}} : {} to {}", n, tensor,
                   n.substr(1), tensor_type, memref_type));
  return n;
}

std::string LoweringContext::element(DType d) {
  switch (d) {
    case DType::kBool:
      return "i1";
    case DType::kI8:
    case DType::kU8:
      return "i8";
    case DType::kI32:
    case DType::kU32:
      return "i32";
    case DType::kI64:
    case DType::kU64:
      return "i64";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
  }
  return "f32";
}

std::string LoweringContext::storage(DType d) { return d == DType::kBool ? "i8" : element(d); }

std::string LoweringContext::type(const ir::TensorType& t) {
  std::string dims;
  for (int64_t d : t.shape) dims += fmt::format("{}x", d);
  return fmt::format("tensor<{}{}>", dims, storage(t.dtype));
}

std::vector<std::string> LoweringContext::identity(int64_t rank) {
  std::vector<std::string> e;
  for (int64_t i = 0; i < rank; ++i) e.push_back(fmt::format("d{}", i));
  return e;
}

std::string LoweringContext::affine_map(int64_t loop_rank, const std::vector<std::string>& exprs) {
  return fmt::format("affine_map<({}) -> ({})>", fmt::join(identity(loop_rank), ", "), fmt::join(exprs, ", "));
}

std::string LoweringContext::empty(const ir::TensorType& t) {
  return let(fmt::format("tensor.empty() : {}", type(t)), "e");
}

std::string LoweringContext::fill(const ir::TensorType& t, double value) {
  BodyBuilder b(&counter_);
  // Bools are stored as i8 (one byte each, as ingot::Array stores them).
  std::string scalar =
      t.dtype == DType::kBool ? b.constant(value != 0 ? 1 : 0, DType::kI8) : b.constant(value, t.dtype);
  for (const std::string& l : b.lines()) emit(l);
  const std::string e = empty(t);
  return let(fmt::format("linalg.fill ins({} : {}) outs({} : {}) -> {}", scalar, storage(t.dtype), e, type(t), type(t)),
             "f");
}

std::string LoweringContext::generic(
    int64_t loop_rank, const std::vector<std::string>& iterators, const std::vector<GenericInput>& ins,
    const ir::TensorType& out, const std::vector<std::string>& out_map, const std::string& init,
    const std::function<std::string(BodyBuilder&, const std::vector<std::string>&)>& body) {
  const std::string out_init = init.empty() ? empty(out) : init;
  std::vector<std::string> maps, in_names, in_types, iters, args;
  for (const GenericInput& in : ins) {
    maps.push_back(affine_map(loop_rank, in.map));
    in_names.push_back(in.value);
    in_types.push_back(type(in.type));
  }
  maps.push_back(affine_map(loop_rank, out_map));
  for (const std::string& it : iterators) iters.push_back(fmt::format("\"{}\"", it));
  BodyBuilder b(&counter_);
  std::vector<std::string> block_args;
  for (size_t i = 0; i <= ins.size(); ++i) {
    const DType dt = i < ins.size() ? ins[i].type.dtype : out.dtype;
    std::string a = b.fresh();
    args.push_back(fmt::format("{}: {}", a, storage(dt)));
    // Bool storage is i8; the body computes on i1.
    if (dt == DType::kBool) a = b.let(fmt::format("arith.trunci {} : i8 to i1", a));
    block_args.push_back(a);
  }
  std::string yielded = body(b, block_args);
  if (out.dtype == DType::kBool) yielded = b.let(fmt::format("arith.extui {} : i1 to i8", yielded));
  const std::string result = fresh("g");
  const std::string ins_clause =
      ins.empty() ? "" : fmt::format("ins({} : {}) ", fmt::join(in_names, ", "), fmt::join(in_types, ", "));
  emit(fmt::format("{} = linalg.generic {{indexing_maps = [{}], iterator_types = [{}]}} {}outs({} : {}) {{", result,
                   fmt::join(maps, ", "), fmt::join(iters, ", "), ins_clause, out_init, type(out)));
  emit(fmt::format("^bb0({}):", fmt::join(args, ", ")));
  for (const std::string& l : b.lines()) emit("  " + l);
  emit(fmt::format("  linalg.yield {} : {}", yielded, storage(out.dtype)));
  emit(fmt::format("}} -> {}", type(out)));
  return result;
}

std::string LoweringContext::map(
    const std::vector<std::string>& operands, const std::vector<ir::TensorType>& types, const ir::TensorType& out,
    const std::function<std::string(BodyBuilder&, const std::vector<std::string>&)>& body) {
  std::vector<GenericInput> ins;
  for (size_t i = 0; i < operands.size(); ++i) ins.push_back({operands[i], types[i], identity(out.rank())});
  std::vector<std::string> iters(static_cast<size_t>(out.rank()), "parallel");
  return generic(out.rank(), iters, ins, out, identity(out.rank()), "", body);
}

void LoweringContext::declare(const std::string& declaration) {
  if (std::find(declarations_.begin(), declarations_.end(), declaration) == declarations_.end()) {
    declarations_.push_back(declaration);
  }
}

namespace {

/// For each node of `graph` (topological order), whether one of its outputs reaches a graph
/// output.
std::vector<bool> live_nodes(const ir::Graph& graph) {
  std::vector<bool> live_value(static_cast<size_t>(graph.num_values()), false);
  for (ir::ValueId o : graph.outputs()) live_value[static_cast<size_t>(o)] = true;
  std::vector<bool> live(graph.nodes().size(), false);
  for (size_t n = graph.nodes().size(); n-- > 0;) {
    const ir::Node& node = graph.nodes()[n];
    for (ir::ValueId o : node.outputs) live[n] = live[n] || live_value[static_cast<size_t>(o)];
    if (!live[n]) continue;
    for (ir::ValueId i : node.inputs) live_value[static_cast<size_t>(i)] = true;
  }
  return live;
}

}  // namespace

namespace detail {

void lower_node(LoweringContext& ctx, const ir::Node& node) {
  const ir::OpDef& def = ctx.graph().registry().get(node.op);
  if (!def.lower) {
    throw Error(ErrorCode::kUnimplemented, fmt::format("no lowering for op '{}'", node.op),
                "run this graph with the reference interpreter (ingot::interp::interpret)");
  }
  try {
    def.lower(ctx, node);
  } catch (const Error& e) {
    throw e.with_context(fmt::format("lowering '{}'", node.op));
  }
}

void lower_constant_inputs(LoweringContext& ctx, const ir::Node& node, const std::vector<bool>& constant) {
  for (ir::ValueId v : node.inputs) {
    if (ctx.bound(v)) continue;
    const ir::NodeId p = ctx.graph().value(v).producer;
    if (p < 0 || !constant[static_cast<size_t>(p)]) {
      throw Error(ErrorCode::kInternal, fmt::format("lowering: value %{} used before it was lowered", v));
    }
    lower_constant_inputs(ctx, ctx.graph().node(p), constant);
    lower_node(ctx, ctx.graph().node(p));
  }
}

}  // namespace detail

LoweredModule lower_graph(const ir::Graph& graph, const std::string& entry,
                          const std::vector<std::pair<size_t, size_t>>& donated, const LoweringOptions& options) {
  if (options.library_conv_min_k < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("LoweringOptions::library_conv_min_k is {}", options.library_conv_min_k),
                "use 0 to send every f32/f64 convolution to the library, or a positive reduction length");
  }
  LoweringContext ctx(graph, options);
  LoweredModule lowered;
  std::vector<std::string> params;
  for (size_t i = 0; i < graph.parameters().size(); ++i) {
    const ir::ValueId p = graph.parameters()[i];
    const std::string name = fmt::format("%p{}", i);
    ctx.bind(p, name);
    params.push_back(fmt::format("{}: {}", name, LoweringContext::type(graph.type(p))));
    lowered.params.push_back(graph.type(p));
  }
  const std::vector<bool> live = live_nodes(graph);
  std::string functions;
  std::set<ir::ValueId> in_place;  // donated outputs a scope function computed into their parameter
  if (!options.share_repeated_scopes ||
      !detail::lower_with_scope_functions(ctx, live, donated, functions, lowered, in_place)) {
    for (size_t n = 0; n < graph.nodes().size(); ++n) {
      // Dead nodes (no output reaches a graph output, e.g. an input cotangent nobody asked for in
      // a traced train step) are not lowered: MLIR drops unused loop nests, but a library call
      // (GEMM, convolution) is opaque to its dead-code elimination and would still run.
      if (live[n]) detail::lower_node(ctx, graph.nodes()[n]);
    }
  }
  std::vector<std::string> out_names, out_types;
  std::vector<ir::ValueId> unique;
  for (size_t j = 0; j < graph.outputs().size(); ++j) {
    const ir::ValueId v = graph.outputs()[j];
    auto pair = std::find_if(donated.begin(), donated.end(), [&](const auto& p) { return p.second == j; });
    if (pair != donated.end()) {  // computed into the donated parameter's buffer
      const ir::TensorType& t = graph.type(v);
      const std::string type = LoweringContext::type(t);
      // A scope function already computed it into the parameter (its call's result is that
      // buffer); a materialization here would only make the entry's bufferization work harder.
      const std::string into =
          in_place.count(v) != 0
              ? ctx.value(v)
              : ctx.let(fmt::format("bufferization.materialize_in_destination {} in %p{} : ({}, {}) -> {}",
                                    ctx.value(v), pair->first, type, type, type),
                        "donated");
      lowered.result_of_output.push_back(out_names.size());
      unique.push_back(-1);  // never shared with another output
      out_names.push_back(into);
      out_types.push_back(type);
      lowered.results.push_back(t);
      continue;
    }
    auto it = std::find(unique.begin(), unique.end(), v);
    if (it == unique.end()) {
      lowered.result_of_output.push_back(unique.size());
      unique.push_back(v);
      out_names.push_back(ctx.value(v));
      out_types.push_back(LoweringContext::type(graph.type(v)));
      lowered.results.push_back(graph.type(v));
    } else {
      lowered.result_of_output.push_back(static_cast<size_t>(it - unique.begin()));
    }
  }
  std::string text = fmt::format("func.func @{}({}) -> ({}) attributes {{llvm.emit_c_interface}} {{\n", entry,
                                 fmt::join(params, ", "), fmt::join(out_types, ", "));
  for (const std::string& l : ctx.lines()) text += l + "\n";
  text += fmt::format("    return {}{}{}\n  }}\n", fmt::join(out_names, ", "), out_names.empty() ? "" : " : ",
                      fmt::join(out_types, ", "));
  std::string decls;
  for (const std::string& d : ctx.declarations()) decls += "  " + d + "\n";
  lowered.text = "module {\n" + decls + functions + "  " + text + "}\n";
  return lowered;
}

std::string lower_to_mlir(const ir::Graph& graph, const std::string& entry) { return lower_graph(graph, entry).text; }

}  // namespace ingot::lower
