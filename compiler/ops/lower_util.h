// Internal helpers shared by the lowering files of compiler/ops (*_lower.cpp).
#pragma once

#include <fmt/format.h>

#include <cctype>
#include <string>
#include <vector>

#include "ingot/ir/op_registry.h"
#include "ingot/lower/lowering.h"

namespace ingot::ir::lowering_util {

using lower::BodyBuilder;
using lower::GenericInput;
using lower::LoweringContext;
/// Block arguments / SSA names handed to generic-body callbacks.
using Args = std::vector<std::string>;

/// Type of result `i` / operand `i` of `node`.
inline TensorType out_type(const LoweringContext& ctx, const Node& node, size_t i = 0) {
  return ctx.graph().type(node.outputs.at(i));
}
inline TensorType in_type(const LoweringContext& ctx, const Node& node, size_t i) {
  return ctx.graph().type(node.inputs.at(i));
}
/// MLIR tensor type, scalar element type and storage element type (i8 for bool).
inline std::string ty(const TensorType& t) { return LoweringContext::type(t); }
inline std::string el(DType d) { return LoweringContext::element(d); }
inline bool is_half(DType d) { return d == DType::kF16 || d == DType::kBF16; }
/// An `index` constant.
inline std::string index_const(BodyBuilder& b, int64_t v) {
  return b.let(fmt::format("arith.constant {} : index", v));
}

/// Multi-index of the row-major flat index `flat` (an index value) in `shape` (all sizes > 0).
inline std::vector<std::string> unravel(BodyBuilder& b, const std::string& flat, const Shape& shape) {
  std::vector<std::string> idx;
  int64_t stride = num_elements(shape);
  for (int64_t size : shape) {
    stride /= size;
    const std::string q = b.let(fmt::format("arith.divui {}, {} : index", flat, index_const(b, stride)));
    idx.push_back(b.let(fmt::format("arith.remui {}, {} : index", q, index_const(b, size))));
  }
  return idx;
}

/// Function-level code (loop nests, multi-result generics) written with a BodyBuilder so that the
/// scalar helpers serve it too. Its "%b<N>" names are renamed "%k<M>_<N>" (M fresh from the
/// context) when flushed, so they cannot clash with the context's names or with the "%b<N>"
/// names of generic bodies.
class LocalCode {
 public:
  explicit LocalCode(LoweringContext& ctx) : ctx_(ctx), prefix_(ctx.fresh("k") + "_") {}
  BodyBuilder& b() { return b_; }
  /// The function-level name of local name `local`.
  std::string name(const std::string& local) const { return rename(local); }
  /// Appends the builder's lines to the function body.
  void flush() const {
    for (const std::string& l : b_.lines()) ctx_.emit(rename(l));
  }
  /// Appends one line written with local names straight to the function body.
  void emit(const std::string& line) const { ctx_.emit(rename(line)); }

 private:
  std::string rename(const std::string& text) const {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '%' && i + 2 < text.size() && text[i + 1] == 'b' &&
          std::isdigit(static_cast<unsigned char>(text[i + 2])) != 0) {
        out += prefix_;
        ++i;  // skip "%b"
        continue;
      }
      out += text[i];
    }
    return out;
  }
  LoweringContext& ctx_;
  std::string prefix_;
  int64_t counter_ = 0;
  BodyBuilder b_{&counter_};
};

}  // namespace ingot::ir::lowering_util
