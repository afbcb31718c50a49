// libFuzzer target: parse_npy (the .npy reader load_npy and the .npz members use).
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_common.h"
#include "ingot/trainer/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  ingot::fuzz::expect_only_ingot_errors("fuzz_npy", [&] { (void)ingot::parse_npy(bytes, "fuzz.npy"); });
  return 0;
}
