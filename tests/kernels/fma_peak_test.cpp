// kernels::measured_fma_peak_gflops (include/ingot/kernels/cpu_peak.h): a plausible positive rate
// and a named error for no threads. No wall-clock goals.
#include "ingot/kernels/cpu_peak.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace ingot {
namespace {

TEST(FmaPeak, IsPositiveAndThreadsAreRefusedBelowOne) {
  const double one = kernels::measured_fma_peak_gflops(1);
  EXPECT_GT(one, 0.1);  // any x86-64 with AVX2 does billions of FMAs per second
  EXPECT_LT(one, 1e5);  // and not 100 TFLOP/s on one thread: the count is per second, not per round
  testing::expect_error([] { kernels::measured_fma_peak_gflops(0); }, ErrorCode::kInvalidArgument,
                        {"measured_fma_peak_gflops: threads is 0", "1 or more"});
}

}  // namespace
}  // namespace ingot
