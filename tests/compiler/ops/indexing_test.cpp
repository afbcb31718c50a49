// Shape rules and verification errors of gather and scatter.
#include <gtest/gtest.h>

#include "op_attrs.h"
#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using testing::gather_attrs;
using testing::scatter_attrs;
using ir::TensorType;
using testing::expect_error;
using testing::infer;
using Ints = std::vector<int64_t>;

TensorType f32t(Shape s) { return {std::move(s), DType::kF32}; }
TensorType i32t(Shape s) { return {std::move(s), DType::kI32}; }

/// Embedding lookup: rows of a (n, d) table at (k,) indices.
Attributes embedding_attrs(int64_t d) { return gather_attrs({1}, {0}, {0}, 1, {1, d}); }

TensorType gather1(TensorType operand, TensorType indices, const Attributes& attrs) {
  auto out = infer("gather", {std::move(operand), std::move(indices)}, attrs);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

// ----- gather -----

TEST(GatherShape, EmbeddingLookup) {
  EXPECT_EQ(gather1(f32t({5, 3}), i32t({2}), embedding_attrs(3)), f32t({2, 3}));
  // A batch of index sequences: index_vector_dim = rank (implicit trailing 1).
  EXPECT_EQ(gather1(f32t({5, 3}), i32t({4, 7}), gather_attrs({2}, {0}, {0}, 2, {1, 3})), f32t({4, 7, 3}));
}

TEST(GatherShape, StableHloSpecExample) {
  EXPECT_EQ(gather1(f32t({3, 4, 2}), {{2, 3, 2}, DType::kI64}, gather_attrs({2, 3}, {0}, {1, 0}, 2, {1, 2, 2})),
            f32t({2, 3, 2, 2}));
}

TEST(GatherShape, OffsetDimsMayPrecedeBatchDims) {
  // Offset dim first: result (3, 2) holds the gathered rows as columns.
  EXPECT_EQ(gather1(f32t({5, 3}), i32t({2}), gather_attrs({0}, {0}, {0}, 1, {1, 3})), f32t({3, 2}));
}

TEST(GatherShape, IndexVectorDimInTheMiddleOrFront) {
  // indices (2, 4) with index_vector_dim 0: four index vectors of 2 components.
  EXPECT_EQ(gather1(f32t({6, 7}), i32t({2, 4}), gather_attrs({}, {0, 1}, {0, 1}, 0, {1, 1})), f32t({4}));
  EXPECT_EQ(gather1(f32t({6, 7}), i32t({3, 2, 4}), gather_attrs({2}, {0}, {0, 1}, 1, {1, 2})), f32t({3, 4, 2}));
}

TEST(GatherShape, NoCollapsedDimsKeepsSliceShape) {
  EXPECT_EQ(gather1(f32t({4, 4}), i32t({2}), gather_attrs({0, 1}, {}, {0, 1}, 0, {2, 2})), f32t({2, 2}));
}

TEST(GatherShape, AnyIntegerIndexDTypeAndOperandDType) {
  for (DType it : {DType::kI8, DType::kU8, DType::kI32, DType::kU32, DType::kI64, DType::kU64}) {
    EXPECT_EQ(gather1({{5, 3}, DType::kBF16}, {{2}, it}, embedding_attrs(3)), (TensorType{{2, 3}, DType::kBF16}));
  }
  EXPECT_EQ(gather1({{5, 3}, DType::kBool}, i32t({2}), embedding_attrs(3)), (TensorType{{2, 3}, DType::kBool}));
}

TEST(GatherShape, EmptyIndices) { EXPECT_EQ(gather1(f32t({5, 3}), i32t({0}), embedding_attrs(3)), f32t({0, 3})); }

TEST(GatherErrors, SliceSizesLength) {
  expect_error([] { gather1(f32t({5, 3}), i32t({2}), gather_attrs({1}, {0}, {0}, 1, {1})); }, ErrorCode::kShapeMismatch,
               {"gather", "slice_sizes = [1]", "1 entries", "f32[5,3]", "rank 2"});
}

TEST(GatherErrors, CollapsedDimWithSliceSizeOtherThanOne) {
  expect_error([] { gather1(f32t({5, 3}), i32t({2}), gather_attrs({1}, {0}, {0}, 1, {2, 3})); },
               ErrorCode::kInvalidArgument, {"gather", "collapsed_slice_dims = [0]", "slice_sizes[0] = 2"});
}

TEST(GatherErrors, SliceLargerThanOperand) {
  expect_error([] { gather1(f32t({5, 3}), i32t({2}), gather_attrs({1}, {0}, {0}, 1, {1, 4})); }, ErrorCode::kOutOfRange,
               {"gather", "slice_sizes = [1, 4]", "dim 1", "size 3"});
}

TEST(GatherErrors, NonIntegerIndices) {
  expect_error([] { gather1(f32t({5, 3}), f32t({2}), embedding_attrs(3)); }, ErrorCode::kDTypeMismatch,
               {"gather", "start_indices", "f32", "integer"});
  expect_error([] { gather1(f32t({5, 3}), {{2}, DType::kBool}, embedding_attrs(3)); }, ErrorCode::kDTypeMismatch,
               {"gather", "start_indices", "bool"});
}

TEST(GatherErrors, StartIndexMapLength) {
  expect_error([] { gather1(f32t({5, 3}), i32t({2, 2}), embedding_attrs(3)); }, ErrorCode::kShapeMismatch,
               {"gather", "start_index_map = [0]", "1 entries", "i32[2,2]", "2 components"});
}

TEST(GatherErrors, IndexVectorDimOutOfRange) {
  expect_error([] { gather1(f32t({5, 3}), i32t({2}), gather_attrs({1}, {0}, {0}, 2, {1, 3})); }, ErrorCode::kOutOfRange,
               {"gather", "index_vector_dim = 2", "i32[2]", "[0, 1]"});
}

TEST(GatherErrors, OffsetDims) {
  expect_error([] { gather1(f32t({5, 3}), i32t({2}), gather_attrs({}, {0}, {0}, 1, {1, 3})); },
               ErrorCode::kShapeMismatch, {"gather", "offset_dims = []", "collapsed_slice_dims = [0]", "leaving 1"});
  expect_error([] { gather1(f32t({4, 4}), i32t({2}), gather_attrs({1, 0}, {}, {0, 1}, 0, {2, 2})); },
               ErrorCode::kInvalidArgument, {"gather", "offset_dims = [1, 0]", "not sorted"});
  expect_error([] { gather1(f32t({5, 3}), i32t({2}), gather_attrs({2}, {0}, {0}, 1, {1, 3})); }, ErrorCode::kOutOfRange,
               {"gather", "offset_dims = [2]", "rank 2"});
}

TEST(GatherErrors, StartIndexMapAndCollapsedDims) {
  expect_error([] { gather1(f32t({5, 3}), i32t({2}), gather_attrs({1}, {0}, {2}, 1, {1, 3})); }, ErrorCode::kOutOfRange,
               {"gather", "start_index_map = [2]", "rank 2"});
  expect_error([] { gather1(f32t({5, 3}), i32t({2, 2}), gather_attrs({}, {0, 1}, {0, 0}, 1, {1, 1})); },
               ErrorCode::kInvalidArgument, {"gather", "start_index_map = [0, 0]", "repeats"});
  expect_error([] { gather1(f32t({5, 3}), i32t({2}), gather_attrs({1}, {0, 0}, {0}, 1, {1, 1})); },
               ErrorCode::kInvalidArgument, {"gather", "collapsed_slice_dims = [0, 0]", "repeats"});
}

TEST(GatherErrors, MissingOrMistypedAttributes) {
  Attributes a = embedding_attrs(3);
  a.erase("index_vector_dim");
  expect_error([&] { gather1(f32t({5, 3}), i32t({2}), a); }, ErrorCode::kNotFound, {"gather", "index_vector_dim"});
  Attributes b = embedding_attrs(3);
  b.erase("slice_sizes");
  expect_error([&] { gather1(f32t({5, 3}), i32t({2}), b); }, ErrorCode::kNotFound, {"gather", "slice_sizes"});
  Attributes c = embedding_attrs(3);
  c.set("indices_are_sorted", int64_t{1});
  expect_error([&] { gather1(f32t({5, 3}), i32t({2}), c); }, ErrorCode::kInvalidArgument,
               {"gather", "indices_are_sorted", "bool"});
  Attributes d = embedding_attrs(3);
  d.set("slice_size", Ints{1, 3});
  expect_error([&] { gather1(f32t({5, 3}), i32t({2}), d); }, ErrorCode::kInvalidArgument,
               {"gather", "unknown attribute 'slice_size'"});
}

// ----- scatter -----

/// Row updates of a (n, d) table at (k,) indices (the embedding gradient).
Attributes row_scatter(const std::string& computation = "add") { return scatter_attrs({1}, {0}, {0}, 1, computation); }

TensorType scatter1(TensorType operand, TensorType indices, TensorType updates, const Attributes& attrs) {
  auto out = infer("scatter", {std::move(operand), std::move(indices), std::move(updates)}, attrs);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

TEST(ScatterShape, ResultHasOperandType) {
  EXPECT_EQ(scatter1(f32t({5, 3}), i32t({4}), f32t({4, 3}), row_scatter()), f32t({5, 3}));
  EXPECT_EQ(scatter1({{5, 3}, DType::kBool}, i32t({4}), {{4, 3}, DType::kBool}, row_scatter("assign")),
            (TensorType{{5, 3}, DType::kBool}));
}

TEST(ScatterShape, StableHloSpecExampleAndOptionalHints) {
  Attributes a = scatter_attrs({2, 3}, {0}, {1, 0}, 2, "add");
  a.set("indices_are_sorted", false);
  a.set("unique_indices", false);
  EXPECT_EQ(scatter1(i32t({3, 4, 2}), {{2, 3, 2}, DType::kI64}, i32t({2, 3, 2, 2}), a), i32t({3, 4, 2}));
}

TEST(ScatterShape, WindowSmallerThanOperand) {
  EXPECT_EQ(scatter1(f32t({5}), i32t({2, 1}), f32t({2, 3}), scatter_attrs({1}, {}, {0}, 1, "add")), f32t({5}));
}

TEST(ScatterErrors, UpdatesDTypeMismatch) {
  expect_error([] { scatter1(f32t({5, 3}), i32t({4}), {{4, 3}, DType::kF16}, row_scatter()); },
               ErrorCode::kDTypeMismatch, {"scatter", "f16[4,3]", "f32[5,3]"});
}

TEST(ScatterErrors, NonIntegerIndices) {
  expect_error([] { scatter1(f32t({5, 3}), f32t({4}), f32t({4, 3}), row_scatter()); }, ErrorCode::kDTypeMismatch,
               {"scatter", "scatter_indices", "f32", "integer"});
}

TEST(ScatterErrors, UpdatesShape) {
  expect_error([] { scatter1(f32t({5, 3}), i32t({4}), f32t({4, 3, 1}), row_scatter()); }, ErrorCode::kShapeMismatch,
               {"scatter", "f32[4,3,1]", "rank 3", "expected 2"});
  expect_error([] { scatter1(f32t({5, 3}), i32t({4}), f32t({2, 3}), row_scatter()); }, ErrorCode::kShapeMismatch,
               {"scatter", "dim 0 has size 2", "has size 4"});
  expect_error([] { scatter1(f32t({5, 3}), i32t({4}), f32t({4, 4}), row_scatter()); }, ErrorCode::kShapeMismatch,
               {"scatter", "size 4", "f32[5,3] dim 1 of size 3"});
}

TEST(ScatterErrors, WindowDimsAttributes) {
  expect_error([] { scatter1(f32t({5, 3}), i32t({4}), f32t({4, 3}), scatter_attrs({1}, {}, {0}, 1, "add")); },
               ErrorCode::kShapeMismatch,
               {"scatter", "update_window_dims = [1]", "inserted_window_dims = []", "leaving 2"});
  expect_error([] { scatter1(f32t({5, 3}), i32t({4}), f32t({4, 3}), scatter_attrs({1}, {2}, {0}, 1, "add")); },
               ErrorCode::kOutOfRange, {"scatter", "inserted_window_dims = [2]", "rank 2"});
  expect_error([] { scatter1(f32t({4, 4}), i32t({2}), f32t({2, 2}), scatter_attrs({1, 0}, {}, {0, 1}, 1, "add")); },
               ErrorCode::kShapeMismatch, {"scatter", "scatter_dims_to_operand_dims = [0, 1]", "1 components"});
  expect_error([] { scatter1(f32t({4, 4}), i32t({2, 2}), f32t({2, 2}), scatter_attrs({1, 0}, {}, {0, 1}, 1, "add")); },
               ErrorCode::kShapeMismatch, {"scatter", "rank 2", "expected 3"});
  expect_error(
      [] { scatter1(f32t({4, 4}), i32t({2, 2}), f32t({2, 2, 2}), scatter_attrs({2, 1}, {}, {0, 1}, 1, "add")); },
      ErrorCode::kInvalidArgument, {"scatter", "update_window_dims = [2, 1]", "not sorted"});
}

TEST(ScatterErrors, Computation) {
  expect_error([] { scatter1(f32t({5, 3}), i32t({4}), f32t({4, 3}), row_scatter("mul")); }, ErrorCode::kInvalidArgument,
               {"scatter", "computation = \"mul\"", "\"assign\""});
  expect_error([] { scatter1({{5, 3}, DType::kBool}, i32t({4}), {{4, 3}, DType::kBool}, row_scatter("add")); },
               ErrorCode::kDTypeMismatch, {"scatter", "bool", "add"});
  Attributes a = row_scatter();
  a.erase("computation");
  expect_error([&] { scatter1(f32t({5, 3}), i32t({4}), f32t({4, 3}), a); }, ErrorCode::kNotFound,
               {"scatter", "computation"});
}

TEST(ScatterErrors, HintsMustBeBool) {
  Attributes a = row_scatter();
  a.set("unique_indices", std::string("yes"));
  expect_error([&] { scatter1(f32t({5, 3}), i32t({4}), f32t({4, 3}), a); }, ErrorCode::kInvalidArgument,
               {"scatter", "unique_indices", "bool"});
}

TEST(ScatterErrors, OperandCount) {
  expect_error([] { infer("scatter", {f32t({5, 3}), i32t({4})}, row_scatter()); }, ErrorCode::kInvalidArgument,
               {"scatter", "takes 3 operands"});
}

}  // namespace
}  // namespace ingot
