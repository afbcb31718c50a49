// MLIR lowering rule of the random family (op in compiler/ops/random.cpp; semantics in
// docs/ir.md): rng_bit_generator as Threefry-2x32 with 20 rounds in i32 arithmetic, bit for bit
// as the interpreter kernel.
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ingot/ir/op_registry.h"
#include "ingot/lower/lowering.h"
#include "ops/lower_util.h"

namespace ingot::ir {

namespace {

using namespace lowering_util;

/// Threefry-2x32, 20 rounds, on i32 values (wrapping adds; rotations by shifts).
std::pair<std::string, std::string> threefry(BodyBuilder& b, const std::array<std::string, 3>& ks, std::string x0,
                                             std::string x1) {
  static constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  auto add = [&](const std::string& x, const std::string& y) {
    return b.let(fmt::format("arith.addi {}, {} : i32", x, y));
  };
  auto c32 = [&](int64_t v) {
    return b.let(fmt::format("arith.constant {} : i32", static_cast<int32_t>(static_cast<uint32_t>(v))));
  };
  x0 = add(x0, ks[0]);
  x1 = add(x1, ks[1]);
  for (int round = 0; round < 20; ++round) {
    const int rot = kRotations[round % 8];
    x0 = add(x0, x1);
    const std::string hi = b.let(fmt::format("arith.shli {}, {} : i32", x1, c32(rot)));
    const std::string lo = b.let(fmt::format("arith.shrui {}, {} : i32", x1, c32(32 - rot)));
    x1 = b.let(fmt::format("arith.xori {}, {} : i32", b.let(fmt::format("arith.ori {}, {} : i32", hi, lo)), x0));
    if (round % 4 == 3) {
      const int s = round / 4 + 1;
      x0 = add(x0, ks[s % 3]);
      x1 = add(x1, add(ks[(s + 1) % 3], c32(s)));
    }
  }
  return {x0, x1};
}

/// The key schedule at the function level, then a parallel linalg.generic over the output whose
/// element i encrypts counter state[1] + block(i) (block = i / 2 for u32 words, i for u64) and
/// takes its word(s); the new state is [state[0], state[1] + blocks].
void lower_rng(LoweringContext& ctx, const Node& node) {
  const TensorType bits_t = out_type(ctx, node, 1);
  const bool wide = bits_t.dtype == DType::kU64;
  const int64_t count = num_elements(bits_t.shape);
  const int64_t blocks = wide ? count : (count + 1) / 2;
  const std::string state = ctx.operand(node, 0);
  const std::string c0 = ctx.let("arith.constant 0 : index", "c"), c1 = ctx.let("arith.constant 1 : index", "c");
  const std::string key = ctx.let(fmt::format("tensor.extract {}[{}] : tensor<2xi64>", state, c0), "t");
  const std::string counter = ctx.let(fmt::format("tensor.extract {}[{}] : tensor<2xi64>", state, c1), "t");
  const std::string c32 = ctx.let("arith.constant 32 : i64", "c");
  std::array<std::string, 3> ks;
  ks[0] = ctx.let(fmt::format("arith.trunci {} : i64 to i32", key), "t");
  ks[1] = ctx.let(
      fmt::format("arith.trunci {} : i64 to i32", ctx.let(fmt::format("arith.shrui {}, {} : i64", key, c32), "t")),
      "t");
  const std::string parity = ctx.let(fmt::format("arith.constant {} : i32", static_cast<int32_t>(0x1BD11BDAu)), "c");
  ks[2] = ctx.let(fmt::format("arith.xori {}, {} : i32", parity,
                              ctx.let(fmt::format("arith.xori {}, {} : i32", ks[0], ks[1]), "t")),
                  "t");
  const std::string advanced = ctx.let(
      fmt::format("arith.addi {}, {} : i64", counter, ctx.let(fmt::format("arith.constant {} : i64", blocks), "c")),
      "t");
  ctx.bind(node.outputs[0], ctx.let(fmt::format("tensor.from_elements {}, {} : tensor<2xi64>", key, advanced), "st"));
  if (count == 0) return ctx.bind(node.outputs[1], ctx.empty(bits_t));
  const std::string bits = ctx.generic(
      bits_t.rank(), std::vector<std::string>(static_cast<size_t>(bits_t.rank()), "parallel"), {}, bits_t,
      LoweringContext::identity(bits_t.rank()), "", [&](BodyBuilder& b, const Args&) {
        std::string flat = i64_const(b, 0);
        int64_t stride = count;
        for (int64_t d = 0; d < bits_t.rank(); ++d) {
          stride /= bits_t.shape[d];
          const std::string i = b.let(fmt::format("arith.index_cast {} : index to i64", b.index(d)));
          flat = b.let(fmt::format("arith.addi {}, {} : i64", flat,
                                   b.let(fmt::format("arith.muli {}, {} : i64", i, i64_const(b, stride)))));
        }
        const std::string one = i64_const(b, 1);
        const std::string block = wide ? flat : b.let(fmt::format("arith.shrui {}, {} : i64", flat, one));
        const std::string ctr = b.let(fmt::format("arith.addi {}, {} : i64", counter, block));
        const std::string lo = b.let(fmt::format("arith.trunci {} : i64 to i32", ctr));
        const std::string hi = b.let(fmt::format(
            "arith.trunci {} : i64 to i32", b.let(fmt::format("arith.shrui {}, {} : i64", ctr, i64_const(b, 32)))));
        const auto [y0, y1] = threefry(b, ks, lo, hi);
        if (!wide) {
          const std::string odd = b.let(
              fmt::format("arith.trunci {} : i64 to i1", b.let(fmt::format("arith.andi {}, {} : i64", flat, one))));
          return b.let(fmt::format("arith.select {}, {}, {} : i32", odd, y1, y0));
        }
        const std::string w0 = b.let(fmt::format("arith.extui {} : i32 to i64", y0));
        const std::string w1 = b.let(fmt::format(
            "arith.shli {}, {} : i64", b.let(fmt::format("arith.extui {} : i32 to i64", y1)), i64_const(b, 32)));
        return b.let(fmt::format("arith.ori {}, {} : i64", w0, w1));
      });
  ctx.bind(node.outputs[1], bits);
}

}  // namespace

void register_random_lowerings(OpRegistry& r) { r.set_lowering("rng_bit_generator", lower_rng); }

}  // namespace ingot::ir
