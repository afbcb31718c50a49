// Buffer donation (JAX's donate_argnums): in-place updates, allocator accounting, and the errors
// for using or double-donating a donated array.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ingot/jit/jit.h"
#include "ingot/trace/ops.h"
#include "test_util.h"

namespace ingot {
namespace {

using testing::expect_error;

/// SGD update: w - lr * g (w, g of `n` floats), plus the loss-like scalar sum(g).
TraceFn sgd_step() {
  return [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] - a[1] * 0.5, sum(a[1])}; };
}

TEST(Donation, SgdUpdateOf64MiBReusesTheParameterBuffer) {
  const int64_t n = int64_t{16} << 20;  // 16 Mi floats = 64 MiB
  Jitted step = jit(sgd_step(), {.name = "sgd", .donate_argnums = {0}});
  Array w = Array::full({n}, 3.0, DType::kF32);
  Array g = Array::full({n}, 2.0, DType::kF32);
  Allocator& alloc = default_cpu_device().allocator();
  step({Array::full({8}, 1.0, DType::kF32), Array::full({8}, 1.0, DType::kF32)});  // unrelated warm-up signature
  // First call compiles; measure a call on fresh arrays so compile-time allocations don't count.
  std::vector<Array> out = step({w, g});
  const void* w_data = out[0].raw_data();
  alloc.reset_peak();
  const int64_t before = alloc.stats().bytes_in_use;
  std::vector<Array> out2 = step({out[0], g});
  const int64_t peak_growth = alloc.stats().peak_bytes_in_use - before;
  std::cout << "[ donation ] peak growth of a donated 64 MiB SGD step: " << peak_growth << " bytes\n";
  EXPECT_LT(peak_growth, n * 4);              // no second copy of the parameters
  EXPECT_EQ(out2[0].raw_data(), w_data);      // the update was written into the donated buffer
  EXPECT_EQ(out2[0].data<float>()[0], 1.0f);  // 3 - 0.5 * 2 - 0.5 * 2
  EXPECT_EQ(out2[0].data<float>()[n - 1], 1.0f);
  EXPECT_EQ(out2[1].data<float>()[0], 2.0f * static_cast<float>(n));
  EXPECT_EQ(step.compile_count(), 2);
}

TEST(Donation, DonatedArraysCannotBeUsedOrDonatedTwice) {
  Jitted step = jit(sgd_step(), {.name = "sgd", .donate_argnums = {0}});
  Array w = Array::full({4}, 1.0, DType::kF32);
  Array g = Array::full({4}, 1.0, DType::kF32);
  std::vector<Array> out = step({w, g});
  EXPECT_TRUE(w.donated());
  expect_error([&] { w.to_vector<float>(); }, ErrorCode::kFailedPrecondition, {"was donated to 'jit:sgd'", "outputs"});
  expect_error([&] { step({w, g}); }, ErrorCode::kInvalidArgument, {"already donated"});
  Array x = Array::full({4}, 1.0, DType::kF32);
  expect_error([&] { step({x, x}); }, ErrorCode::kInvalidArgument,
               {"argument 0 is donated", "also passed as argument 1"});
  EXPECT_FALSE(x.donated());  // a refused call donates nothing
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(4, 1.0f));
  expect_error([&] { jit(sgd_step(), {.donate_argnums = {2}})({x, g}); }, ErrorCode::kInvalidArgument,
               {"donate_argnums: 2 is out of range"});
}

TEST(Donation, TheBufferizedIrUpdatesInPlace) {
  const auto dir = std::filesystem::temp_directory_path() / "ingot_donation_dump";
  std::filesystem::remove_all(dir);
  Jitted step = jit(sgd_step(), {.name = "sgd", .donate_argnums = {0}, .compile = {.dump_dir = dir.string()}});
  step({Array::full({1000}, 1.0, DType::kF32), Array::full({1000}, 1.0, DType::kF32)});
  std::ifstream f(dir / "04-bufferize.mlir");
  std::stringstream text;
  text << f.rdbuf();
  // The elementwise update writes straight into the donated argument: no 1000-float buffer is
  // allocated inside the kernel.
  EXPECT_EQ(text.str().find("memref.alloc() {alignment = 64 : i64} : memref<1000xf32>"), std::string::npos)
      << text.str();
  std::filesystem::remove_all(dir);
}

TEST(Donation, ADonatedParameterReturnedUnchangedKeepsItsValue) {
  Jitted f = jit([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * 2.0, a[0]}; },
                 {.name = "keep", .donate_argnums = {0}});
  std::vector<Array> out = f({Array::full({5}, 3.0, DType::kF32)});
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(5, 6.0f));
  EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>(5, 3.0f));
}

}  // namespace
}  // namespace ingot
