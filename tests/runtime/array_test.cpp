#include "ingot/runtime/array.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

TEST(Error, FormatsCodeMessageAndHint) {
  Error e(ErrorCode::kShapeMismatch, "shapes (2, 3) and (4,) differ", "broadcast first");
  EXPECT_STREQ(e.what(), "[ShapeMismatch] shapes (2, 3) and (4,) differ (hint: broadcast first)");
  Error c = e.with_context("in %2 = add(%0, %1)");
  EXPECT_EQ(c.code(), ErrorCode::kShapeMismatch);
  EXPECT_EQ(c.message(), "in %2 = add(%0, %1): shapes (2, 3) and (4,) differ");
  EXPECT_EQ(c.hint(), "broadcast first");
  Error no_hint(ErrorCode::kInternal, "x");
  EXPECT_STREQ(no_hint.what(), "[Internal] x");
}

TEST(Shape, Helpers) {
  EXPECT_EQ(num_elements({}), 1);
  EXPECT_EQ(num_elements({2, 3, 4}), 24);
  EXPECT_EQ(num_elements({2, 0, 4}), 0);
  // Zero-element shapes whose other sizes multiply past 2^63 (fuzz_idx found the overflow).
  EXPECT_EQ(num_elements({int64_t{1} << 40, int64_t{1} << 40, 0}), 0);
  EXPECT_EQ(num_elements({int64_t{1} << 40, 0, int64_t{1} << 40, int64_t{1} << 40}), 0);
  EXPECT_EQ(row_major_strides({int64_t{1} << 40, 0, int64_t{1} << 40, int64_t{1} << 40}).back(), 1);
  try {
    (void)num_elements({int64_t{1} << 40, int64_t{1} << 40});
    ADD_FAILURE() << "an overflowing element count was returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("more than 2^63 elements"), std::string::npos) << e.what();
  }
  const Array huge_empty = Array::empty({0xffffffffLL, 0xffffffffLL, 0}, DType::kU8);
  EXPECT_EQ(huge_empty.nbytes(), 0u);
  EXPECT_EQ(row_major_strides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(shape_to_string({2, 3}), "(2, 3)");
  EXPECT_EQ(shape_to_string({4}), "(4,)");
  EXPECT_EQ(shape_to_string({}), "()");
  expect_error([] { check_shape({2, -1}, "test"); }, ErrorCode::kInvalidArgument, {"(2, -1)", "-1", "dimension 1"});
}

TEST(Array, FromVectorRoundTrip) {
  Array a = Array::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.dtype(), DType::kF32);
  EXPECT_EQ(a.size(), 6);
  EXPECT_EQ(a.nbytes(), 24);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  std::vector<float> out(6);
  a.copy_to<float>(out);
  EXPECT_EQ(out[5], 6.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw_data()) % Buffer::kAlignment, 0u);
}

TEST(Array, BoolAndHalfStorage) {
  Array b = Array::from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(b.dtype(), DType::kBool);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  Array h = Array::from_doubles({1.0, 1.0 / 3.0, 70000.0}, {3}, DType::kF16);
  EXPECT_EQ(h.to_vector<f16>()[1].bits, 0x3555);
  EXPECT_TRUE(std::isinf(h.element_as_double(2)));
  Array i = Array::from_doubles({2.7, -2.7, 1e12}, {3}, DType::kI32);
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{2, -2, 2147483647}));
}

TEST(Array, ErrorsNameTheProblem) {
  expect_error([] { Array::from_vector<float>({1, 2, 3}, {2, 2}); }, ErrorCode::kShapeMismatch,
               {"3 elements", "(2, 2)", "4 elements"});
  Array a = Array::zeros({2}, DType::kI32);
  expect_error([&] { a.to_vector<float>(); }, ErrorCode::kDTypeMismatch, {"f32", "i32"});
  Array invalid;
  EXPECT_FALSE(invalid.valid());
  expect_error([&] { invalid.raw_data(); }, ErrorCode::kFailedPrecondition, {"invalid"});
  expect_error([] { Array::zeros({-1}, DType::kF32); }, ErrorCode::kInvalidArgument, {"-1"});
  expect_error([&] { a.reshaped({3}); }, ErrorCode::kShapeMismatch, {"(2,)", "(3,)"});
}

TEST(Array, CloneReshapeAndEquality) {
  Array a = Array::from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  Array shared = a;
  Array deep = a.clone();
  a.data<int32_t>()[0] = 9;
  EXPECT_EQ(shared.to_vector<int32_t>()[0], 9);
  EXPECT_EQ(deep.to_vector<int32_t>()[0], 1);
  EXPECT_FALSE(a.bitwise_equal(deep));
  EXPECT_TRUE(a.bitwise_equal(shared));
  EXPECT_EQ(a.reshaped({4}).shape(), (Shape{4}));
  Array nan1 = Array::from_vector<float>({NAN}, {1});
  EXPECT_TRUE(nan1.bitwise_equal(nan1.clone()));
}

TEST(Array, EmptyAndScalar) {
  Array e = Array::zeros({2, 0}, DType::kF32);
  EXPECT_EQ(e.size(), 0);
  EXPECT_EQ(e.to_vector<float>().size(), 0u);
  EXPECT_EQ(e.to_string(), "[[],\n []]");
  Array s = Array::scalar(2.5, DType::kF64);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.to_string(), "2.5");
}

TEST(Array, ToStringLikeNumPy) {
  EXPECT_EQ(Array::from_vector<float>({1, 2, 3, 4}, {2, 2}).to_string(), "[[1., 2.],\n [3., 4.]]");
  EXPECT_EQ(Array::from_vector<int32_t>({1, -20, 3}, {3}).to_string(), "[  1, -20,   3]");
  EXPECT_EQ(Array::from_vector<float>({0.5f, -INFINITY, NAN}, {3}).to_string(), "[ 0.5, -inf,  nan]");
  EXPECT_EQ(Array::from_vector<bool>({true, false}, {2}).to_string(), "[ True, False]");
  EXPECT_EQ(Array::from_vector<int32_t>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}).to_string(),
            "[[[1, 2],\n  [3, 4]],\n\n [[5, 6],\n  [7, 8]]]");
  Array big = Array::zeros({2000}, DType::kI32);
  EXPECT_EQ(big.to_string(), "[0, 0, 0, ..., 0, 0, 0]");
}

TEST(Allocator, TracksBytesInUseAndPeak) {
  Device dev(DeviceKind::kCpu, 7, std::make_unique<HostAllocator>());
  EXPECT_EQ(dev.name(), "cpu:7");
  {
    Array a = Array::zeros({1000}, DType::kF32, &dev);
    EXPECT_EQ(dev.allocator().stats().bytes_in_use, 4000);
    {
      Array b = Array::zeros({500}, DType::kF64, &dev);
      EXPECT_EQ(dev.allocator().stats().bytes_in_use, 8000);
      EXPECT_EQ(&b.device(), &dev);
    }
    EXPECT_EQ(dev.allocator().stats().bytes_in_use, 4000);
    EXPECT_EQ(dev.allocator().stats().peak_bytes_in_use, 8000);
    dev.allocator().reset_peak();
    EXPECT_EQ(dev.allocator().stats().peak_bytes_in_use, 4000);
  }
  AllocatorStats s = dev.allocator().stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.num_allocations, 2);
  EXPECT_EQ(s.num_frees, 2);
}

TEST(Allocator, HugeRequestIsOutOfMemoryError) {
  Device dev(DeviceKind::kCpu, 0, std::make_unique<HostAllocator>());
  expect_error([&] { Array::empty({int64_t{1} << 38, int64_t{1} << 20}, DType::kF64, &dev); }, ErrorCode::kOutOfMemory,
               {"bytes"});
  EXPECT_EQ(dev.allocator().stats().bytes_in_use, 0);
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(Shape, HugeShapesAreRejectedWithoutOverflow) {
  testing::expect_error([] { Array::empty({int64_t{1} << 31, int64_t{1} << 31}, DType::kF32); },
                        ErrorCode::kInvalidArgument, {"more than 2^59 elements"});
  testing::expect_error([] { check_shape({int64_t{1} << 62, 4}, "t"); }, ErrorCode::kInvalidArgument, {"t:", "2^59"});
  check_shape({int64_t{1} << 62, int64_t{1} << 62, 0}, "zero-size");  // 0 elements: fine
  check_shape({int64_t{1} << 59}, "limit");
}

}  // namespace
}  // namespace ingot
