#include "ingot/trace/call.h"

#include <gtest/gtest.h>

#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

TEST(Call, InlinesAGraphIntoTheCurrentTrace) {
  ir::Graph inner = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * a[1] + 1.0}; },
                          {{{3}, DType::kF32}, {{3}, DType::kF32}}, "inner");
  ir::Graph outer = trace(
      [&](const std::vector<Tensor>& a) {
        Tensor twice = call(inner, {a[0], a[0]}).at(0);  // x * x + 1
        return call(inner, {twice, a[0]});               // (x * x + 1) * x + 1
      },
      {{{3}, DType::kF32}}, "outer");
  EXPECT_EQ(outer.num_nodes(), 2 * inner.num_nodes());
  Array x = testing::f32({1, 2, -3});
  testing::expect_values(interp::interpret(outer, {x}).at(0), {3, 11, -29});
}

TEST(Call, ChecksArguments) {
  ir::Graph inner = trace([](const std::vector<Tensor>& a) { return a; }, {{{2, 3}, DType::kF32}}, "inner");
  auto run = [&](ir::TensorType t, int count) {
    trace(
        [&](const std::vector<Tensor>& a) {
          std::vector<Tensor> args(static_cast<size_t>(count), a[0]);
          return call(inner, args);
        },
        {t});
  };
  expect_error([&] { run({{2, 3}, DType::kF32}, 2); }, ErrorCode::kInvalidArgument,
               {"'inner'", "takes 1 arguments but 2"});
  expect_error([&] { run({{3, 2}, DType::kF32}, 1); }, ErrorCode::kShapeMismatch, {"f32[3,2]", "f32[2,3]"});
  expect_error([&] { run({{2, 3}, DType::kI32}, 1); }, ErrorCode::kDTypeMismatch, {"i32[2,3]", "f32[2,3]"});
  expect_error([&] { call(inner, {}); }, ErrorCode::kInvalidArgument, {"takes 1 arguments"});
}

TEST(Call, ConstantOnlyGraphNeedsATrace) {
  ir::Graph consts =
      trace([](const std::vector<Tensor>&) { return std::vector<Tensor>{scalar(2, DType::kF32)}; }, {}, "consts");
  expect_error([&] { call(consts, {}); }, ErrorCode::kTraceError, {"outside of any trace"});
  ir::Graph g = trace([&](const std::vector<Tensor>&) { return call(consts, {}); }, {}, "g");
  testing::expect_values(interp::interpret(g, {}).at(0), {2});
}

}  // namespace
}  // namespace ingot
