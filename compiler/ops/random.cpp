// The random op family: rng_bit_generator with the Threefry-2x32 (20 rounds) counter-based
// generator of Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11), bit for bit
// as in Random123 and JAX. The layout of state and output words is fixed by docs/ir.md.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/op_util.h"

namespace ingot::ir {
namespace {

using ops::check_kernel_call;
using ops::check_known_attrs;

using ops::make_result;

const char* const kRng = "rng_bit_generator";

// ---------------------------------------------------------------------------------------------
// Threefry-2x32.

uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/// Encrypts `counter` under `key` with 20 rounds of Threefry-2x32 (key injection every 4).
std::array<uint32_t, 2> threefry2x32_20(std::array<uint32_t, 2> key, std::array<uint32_t, 2> counter) {
  static constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  uint32_t x0 = counter[0] + ks[0];
  uint32_t x1 = counter[1] + ks[1];
  for (int round = 0; round < 20; ++round) {
    x0 += x1;
    x1 = rotl32(x1, kRotations[round % 8]);
    x1 ^= x0;
    if (round % 4 == 3) {
      const uint32_t s = static_cast<uint32_t>(round / 4 + 1);
      x0 += ks[s % 3];
      x1 += ks[(s + 1) % 3] + s;
    }
  }
  return {x0, x1};
}

uint32_t low32(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t high32(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

// ---------------------------------------------------------------------------------------------
// rng_bit_generator

/// The validated attributes of one rng_bit_generator node.
struct RngConfig {
  Shape shape;
  DType dtype = DType::kU32;
};

void check_state(const TensorType& state) {
  if (state.dtype != DType::kU64) {
    throw Error(ErrorCode::kDTypeMismatch,
                fmt::format("{}: state has type {}, but must be u64[2]", kRng, state.to_string()),
                "pass the state returned by a previous rng_bit_generator, or a u64[2] seed");
  }
  if (state.shape != Shape{2}) {
    throw Error(ErrorCode::kShapeMismatch,
                fmt::format("{}: state has type {} (shape {}), but must be u64[2]", kRng, state.to_string(),
                            shape_to_string(state.shape)),
                "the Threefry state is [key, counter]");
  }
}

/// Reads `name` with `get`, prefixing getter errors (missing, wrong kind) with the op name.
template <class F>
auto read_attr(const Attributes& attrs, const std::string& name, const char* kind, F&& get) {
  if (!attrs.has(name)) {
    throw Error(ErrorCode::kNotFound, fmt::format("{}: missing attribute '{}' ({})", kRng, name, kind),
                fmt::format("set '{}' as described in docs/ir.md", name));
  }
  try {
    return get();
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", kRng, e.message()), e.hint());
  }
}

RngConfig rng_config(const Attributes& attrs) {
  for (const auto& [name, value] : attrs.entries()) {
    if (name != "algorithm" && name != "shape" && name != "dtype") {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: unknown attribute '{}'", kRng, name),
                  "rng_bit_generator takes the attributes algorithm, shape, dtype");
    }
  }
  const std::string algorithm = read_attr(attrs, "algorithm", "string", [&] { return attrs.get_string("algorithm"); });
  if (algorithm != "THREE_FRY") {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: algorithm = \"{}\" is not supported", kRng, algorithm),
                "use algorithm = \"THREE_FRY\"");
  }
  RngConfig c;
  c.shape = read_attr(attrs, "shape", "ints", [&] { return attrs.get_ints("shape"); });
  for (int64_t d : c.shape) {
    if (d < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: shape = [{}] contains the negative size {}", kRng, fmt::join(c.shape, ", "), d),
                  "sizes must be >= 0");
    }
  }
  const std::string dtype = read_attr(attrs, "dtype", "string", [&] { return attrs.get_string("dtype"); });
  if (dtype != "u32" && dtype != "u64") {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: dtype = \"{}\" is not supported", kRng, dtype),
                "use dtype = \"u32\" or \"u64\" and convert the bits afterwards");
  }
  c.dtype = parse_dtype(dtype);
  return c;
}

std::vector<TensorType> rng_rule(std::span<const TensorType> in, const Attributes& attrs) {
  check_state(in[0]);
  const RngConfig c = rng_config(attrs);
  return {TensorType{{2}, DType::kU64}, TensorType{c.shape, c.dtype}};
}

std::vector<Array> rng_interpret(std::span<const Array> in, const Attributes& attrs,
                                 std::span<const TensorType> result_types) {
  check_kernel_call(kRng, 1, rng_rule, in, attrs, result_types);
  const RngConfig c = rng_config(attrs);
  const std::vector<uint64_t> state = in[0].to_vector<uint64_t>();
  const std::array<uint32_t, 2> key = {low32(state[0]), high32(state[0])};
  const int64_t words = num_elements(c.shape) * (c.dtype == DType::kU64 ? 2 : 1);
  const int64_t blocks = (words + 1) / 2;
  std::vector<uint32_t> bits(static_cast<size_t>(2 * blocks));
  for (int64_t j = 0; j < blocks; ++j) {
    const uint64_t counter = state[1] + static_cast<uint64_t>(j);  // wraps modulo 2^64
    const std::array<uint32_t, 2> y = threefry2x32_20(key, {low32(counter), high32(counter)});
    bits[static_cast<size_t>(2 * j)] = y[0];
    bits[static_cast<size_t>(2 * j + 1)] = y[1];
  }
  Array new_state = make_result(result_types[0]);
  new_state.data<uint64_t>()[0] = state[0];
  new_state.data<uint64_t>()[1] = state[1] + static_cast<uint64_t>(blocks);
  Array out = make_result(result_types[1]);
  if (c.dtype == DType::kU32) {
    std::copy_n(bits.begin(), out.size(), out.data<uint32_t>());
  } else {
    uint64_t* o = out.data<uint64_t>();
    for (int64_t i = 0; i < out.size(); ++i) {
      o[i] = static_cast<uint64_t>(bits[static_cast<size_t>(2 * i)]) |
             (static_cast<uint64_t>(bits[static_cast<size_t>(2 * i + 1)]) << 32);
    }
  }
  return {new_state, out};
}

}  // namespace

void register_random_ops(OpRegistry& r) {
  r.add(OpDef{kRng, 1, 1, rng_rule, rng_interpret,
              "Threefry-2x32 random bits from a u64[2] state; returns (new state, bits)"});
}

}  // namespace ingot::ir
