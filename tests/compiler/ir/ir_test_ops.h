// A small op registry for the graph/text/pass tests, independent of the real op families.
#pragma once

#include <fmt/format.h>

#include <memory>

#include "ingot/ir/op_registry.h"

namespace ingot::testing {

/// Throws kShapeMismatch/kDTypeMismatch naming `op` unless every operand has the first one's type.
inline void require_equal_types(const std::string& op, std::span<const ir::TensorType> operands) {
  for (size_t i = 1; i < operands.size(); ++i) {
    if (operands[i].dtype != operands[0].dtype) {
      throw Error(ErrorCode::kDTypeMismatch, fmt::format("{}: operand dtypes differ: {} vs {}", op,
                                                         dtype_name(operands[0].dtype), dtype_name(operands[i].dtype)));
    }
    if (operands[i].shape != operands[0].shape) {
      throw Error(ErrorCode::kShapeMismatch,
                  fmt::format("{}: operand shapes differ: {} vs {}", op, shape_to_string(operands[0].shape),
                              shape_to_string(operands[i].shape)),
                  "broadcast explicitly");
    }
  }
}

/// Ops with simple rules:
/// - `add` (2 operands, equal types, same result), `negate` (1 operand, same result),
/// - `add_n` (1 or more operands of equal types, same result),
/// - `constant` (no operands; result is the type of attribute `value`),
/// - `annotate` (1 operand, any attributes, same result: carries attributes of every kind),
/// - `rng_bit_generator` (state u64[2]; attributes `shape` and `dtype`; results (u64[2], bits)).
/// `flaky` (1 operand, same result) fails with kInvalidArgument while `*fail_flaky` is true.
inline std::unique_ptr<ir::OpRegistry> make_test_registry(const bool* fail_flaky = nullptr) {
  using ir::OpDef;
  using ir::TensorType;
  using Operands = std::span<const TensorType>;
  auto r = std::make_unique<ir::OpRegistry>();
  auto same = [](const char* op) {
    return [op](Operands x, const ir::Attributes&) {
      require_equal_types(op, x);
      return std::vector<TensorType>{x[0]};
    };
  };
  r->add(OpDef{"add", 2, 2, same("add"), {}, "a + b"});
  r->add(OpDef{"negate", 1, 1, same("negate"), {}, "-x"});
  r->add(OpDef{"add_n", 1, -1, same("add_n"), {}, "sum of operands"});
  r->add(OpDef{"annotate", 1, 1, same("annotate"), {}, "identity with attributes"});
  r->add(OpDef{"constant",
               0,
               0,
               [](Operands, const ir::Attributes& a) {
                 const Array& v = a.get_array("value");
                 return std::vector<TensorType>{{v.shape(), v.dtype()}};
               },
               {},
               "literal"});
  r->add(OpDef{"rng_bit_generator",
               1,
               1,
               [](Operands x, const ir::Attributes& a) {
                 if (!(x[0] == TensorType{{2}, DType::kU64})) {
                   throw Error(ErrorCode::kDTypeMismatch,
                               fmt::format("rng_bit_generator: state must be u64[2], got {}", x[0].to_string()));
                 }
                 return std::vector<TensorType>{x[0], {a.get_ints("shape"), parse_dtype(a.get_string("dtype"))}};
               },
               {},
               "random bits"});
  r->add(OpDef{"flaky",
               1,
               1,
               [fail_flaky](Operands x, const ir::Attributes&) {
                 if (fail_flaky && *fail_flaky) {
                   throw Error(ErrorCode::kInvalidArgument, "flaky: told to fail");
                 }
                 return std::vector<TensorType>{x[0]};
               },
               {},
               "fails on request"});
  return r;
}

}  // namespace ingot::testing
