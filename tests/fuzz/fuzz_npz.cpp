// libFuzzer target: load_npz (zip archive of .npy members, libzip) on the input as a file.
#include <cstddef>
#include <cstdint>

#include "fuzz_common.h"
#include "fuzz_file.h"
#include "ingot/trainer/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ingot::fuzz::MemoryFile file("fuzz.npz", data, size);
  ingot::fuzz::expect_only_ingot_errors("fuzz_npz", [&] {
    const ingot::NpzFile archive = ingot::load_npz(file.path());
    for (const auto& [name, array] : archive.arrays()) (void)array.nbytes();
  });
  return 0;
}
