// libFuzzer target: the Fashion-MNIST IDX reader (load_fashion_mnist_test), gzip or plain. The
// first input byte splits the rest into the image file and the label file, written to a
// per-process directory under /dev/shm (the reader takes a directory of named files).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_common.h"
#include "fuzz_file.h"
#include "ingot/trainer/datasets.h"

namespace {

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  ingot::fuzz::write_all(fd, data, size);
  ::close(fd);
}

/// The scratch directory, made once per process (removed by nobody: two small files in /dev/shm).
const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string templ = "/dev/shm/ingot_fuzz_idx_XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) std::abort();
    return templ;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t rest = size - 1;
  const size_t images = rest * data[0] / 255;
  const std::string& dir = scratch_dir();
  write_file(dir + "/t10k-images-idx3-ubyte", data + 1, images);
  write_file(dir + "/t10k-labels-idx1-ubyte", data + 1 + images, rest - images);
  ingot::fuzz::expect_only_ingot_errors("fuzz_idx", [&] {
    const ingot::datasets::FashionMnist f = ingot::datasets::load_fashion_mnist_test(dir);
    (void)f.x_test.nbytes();
  });
  return 0;
}
