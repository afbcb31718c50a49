// libFuzzer target: load_safetensors on the input as a file (fuzz_file.h).
#include <cstddef>
#include <cstdint>

#include "fuzz_common.h"
#include "fuzz_file.h"
#include "ingot/trainer/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ingot::fuzz::MemoryFile file("fuzz.safetensors", data, size);
  ingot::fuzz::expect_only_ingot_errors("fuzz_safetensors", [&] {
    const ingot::SafetensorsFile loaded = ingot::load_safetensors(file.path());
    for (const auto& [name, array] : loaded.tensors) (void)array.nbytes();
  });
  return 0;
}
