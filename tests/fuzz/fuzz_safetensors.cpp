// libFuzzer target: load_safetensors on the input as a file (an in-memory memfd reached through
// /proc/self/fd, so every check of the reader, file size included, sees a regular file).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_common.h"
#include "ingot/trainer/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("fuzz.safetensors", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  ingot::fuzz::expect_only_ingot_errors("fuzz_safetensors", [&] {
    const ingot::SafetensorsFile file = ingot::load_safetensors(path);
    for (const auto& [name, array] : file.tensors) (void)array.nbytes();
  });
  ::close(fd);
  return 0;
}
