// Exact values of rng_bit_generator (Threefry-2x32, 20 rounds) under the reference interpreter.
#include <gtest/gtest.h>

#include <cstdint>

#include "test_util.h"

namespace ingot {
namespace {

using ir::Attributes;
using testing::run_op_all;
using Ints = std::vector<int64_t>;

Attributes rng_attrs(Ints shape, const std::string& dtype = "u32") {
  return {{"algorithm", std::string("THREE_FRY")}, {"shape", shape}, {"dtype", dtype}};
}

Array state(uint64_t key, uint64_t counter) { return Array::from_vector<uint64_t>({key, counter}, {2}); }

/// State whose block 0 uses key (k0, k1) and counter (c0, c1) (low halves first).
Array state_for(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1) {
  return state(uint64_t{k0} | (uint64_t{k1} << 32), uint64_t{c0} | (uint64_t{c1} << 32));
}

struct RngOut {
  std::vector<uint64_t> new_state;
  Array bits;
};

RngOut rng(const Array& s, Ints shape, const std::string& dtype = "u32") {
  std::vector<Array> r = run_op_all("rng_bit_generator", {s}, rng_attrs(std::move(shape), dtype));
  EXPECT_EQ(r.size(), 2u);
  return {r.at(0).to_vector<uint64_t>(), r.at(1)};
}

// Known-answer vectors of Threefry-2x32-20 from Random123's kat_vectors (also JAX's tests).

TEST(RngBitGeneratorInterp, KnownAnswerZeroKeyZeroCounter) {
  RngOut r = rng(state_for(0, 0, 0, 0), {2});
  EXPECT_EQ(r.bits.to_vector<uint32_t>(), (std::vector<uint32_t>{0x6b200159u, 0x99ba4efeu}));
}

TEST(RngBitGeneratorInterp, KnownAnswerAllOnes) {
  RngOut r = rng(state_for(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu), {2});
  EXPECT_EQ(r.bits.to_vector<uint32_t>(), (std::vector<uint32_t>{0x1cb996fcu, 0xbb002be7u}));
}

TEST(RngBitGeneratorInterp, KnownAnswerPiDigits) {
  RngOut r = rng(state_for(0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u), {2});
  EXPECT_EQ(r.bits.to_vector<uint32_t>(), (std::vector<uint32_t>{0xc4923a9cu, 0x483df7a0u}));
}

TEST(RngBitGeneratorInterp, KnownAnswerAsU64LowWordFirst) {
  RngOut r = rng(state_for(0, 0, 0, 0), {}, "u64");
  EXPECT_EQ(r.bits.shape(), Shape{});
  EXPECT_EQ(r.bits.to_vector<uint64_t>(), std::vector<uint64_t>{0x99ba4efe6b200159ull});
}

TEST(RngBitGeneratorInterp, CounterWrapsAndBlockOneUsesCounterPlusOne) {
  // Counter 2^64 - 1: block 1 encrypts counter 0, the first known-answer vector.
  RngOut r = rng(state(0, ~uint64_t{0}), {4});
  std::vector<uint32_t> bits = r.bits.to_vector<uint32_t>();
  EXPECT_EQ(bits[2], 0x6b200159u);
  EXPECT_EQ(bits[3], 0x99ba4efeu);
  EXPECT_EQ(r.new_state, (std::vector<uint64_t>{0, 1}));
}

TEST(RngBitGeneratorInterp, SameStateGivesSameBits) {
  Array s = state(0x0123456789abcdefull, 42);
  RngOut a = rng(s, {3, 5});
  RngOut b = rng(s, {3, 5});
  EXPECT_TRUE(a.bits.bitwise_equal(b.bits));
  EXPECT_EQ(a.new_state, b.new_state);
}

TEST(RngBitGeneratorInterp, DifferentStateGivesDifferentBits) {
  std::vector<uint32_t> base = rng(state(7, 0), {8}).bits.to_vector<uint32_t>();
  std::vector<uint32_t> other_key = rng(state(8, 0), {8}).bits.to_vector<uint32_t>();
  std::vector<uint32_t> other_counter = rng(state(7, 100), {8}).bits.to_vector<uint32_t>();
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_NE(base[i], other_key[i]) << "word " << i;
    EXPECT_NE(base[i], other_counter[i]) << "word " << i;
  }
}

TEST(RngBitGeneratorInterp, NewStateAdvancesCounterByBlocksUsed) {
  const uint64_t key = 0xfeedfacecafebeefull;
  EXPECT_EQ(rng(state(key, 10), {4}).new_state, (std::vector<uint64_t>{key, 12}));
  EXPECT_EQ(rng(state(key, 10), {5}).new_state, (std::vector<uint64_t>{key, 13}));  // odd: 3 blocks
  EXPECT_EQ(rng(state(key, 10), {2, 3}, "u64").new_state, (std::vector<uint64_t>{key, 16}));
  EXPECT_EQ(rng(state(key, 10), {}).new_state, (std::vector<uint64_t>{key, 11}));
  EXPECT_EQ(rng(state(key, 10), {0, 4}).new_state, (std::vector<uint64_t>{key, 10}));
}

TEST(RngBitGeneratorInterp, ChainedCallsContinueTheStream) {
  // Drawing 4 words at once equals drawing 2 and then 2 more from the returned state.
  Array s = state(0x1122334455667788ull, 5);
  std::vector<uint32_t> all = rng(s, {4}).bits.to_vector<uint32_t>();
  RngOut first = rng(s, {2});
  RngOut second = rng(Array::from_vector<uint64_t>(first.new_state, {2}), {2});
  std::vector<uint32_t> joined = first.bits.to_vector<uint32_t>();
  for (uint32_t w : second.bits.to_vector<uint32_t>()) joined.push_back(w);
  EXPECT_EQ(joined, all);
}

TEST(RngBitGeneratorInterp, U64ElementsJoinWordPairsLowFirst) {
  Array s = state(99, 1000);
  std::vector<uint32_t> words = rng(s, {6}).bits.to_vector<uint32_t>();
  RngOut wide = rng(s, {3}, "u64");
  EXPECT_EQ(wide.bits.dtype(), DType::kU64);
  std::vector<uint64_t> v = wide.bits.to_vector<uint64_t>();
  ASSERT_EQ(v.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(v[i], uint64_t{words[2 * i]} | (uint64_t{words[2 * i + 1]} << 32)) << "element " << i;
  }
}

TEST(RngBitGeneratorInterp, OddU32CountUsesFirstWordOfLastBlock) {
  Array s = state(3, 4);
  std::vector<uint32_t> four = rng(s, {4}).bits.to_vector<uint32_t>();
  std::vector<uint32_t> three = rng(s, {3}).bits.to_vector<uint32_t>();
  EXPECT_EQ(three, (std::vector<uint32_t>{four[0], four[1], four[2]}));
}

TEST(RngBitGeneratorInterp, EmptyShape) {
  RngOut r = rng(state(1, 2), {0});
  EXPECT_EQ(r.bits.shape(), Shape{0});
  EXPECT_EQ(r.new_state, (std::vector<uint64_t>{1, 2}));
}

TEST(RngBitGeneratorInterp, KernelRejectsUnverifiedDirectCall) {
  const ir::OpDef& def = ir::OpRegistry::builtin().get("rng_bit_generator");
  std::vector<ir::TensorType> types = {{{2}, DType::kU64}, {{4}, DType::kU32}};
  const std::vector<Array> short_state = {Array::from_vector<uint64_t>({1}, {1})};
  testing::expect_error([&] { def.interpret(short_state, rng_attrs({4}), types); }, ErrorCode::kShapeMismatch,
                        {"rng_bit_generator", "u64[1]"});
}

}  // namespace
}  // namespace ingot
