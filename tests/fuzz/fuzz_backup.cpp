// libFuzzer target: BackupAndRestore's state file as on_train_begin reads it — load_safetensors,
// the backup's metadata (detail::backup_epoch), then load_into against the variables of a fixed
// model (a Dense 4 -> 3 layer under SGD with momentum: kernel, bias, iterations, learning rate
// and two momenta). Extra oracle: when anything is refused, every target holds its old bytes
// (a failed restore changes nothing).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_common.h"
#include "fuzz_file.h"
#include "ingot/runtime/error.h"
#include "ingot/trainer/backup.h"
#include "ingot/trainer/safetensors.h"

namespace {

/// The model's state in the layout BackupAndRestore writes (model_io::training_state_tensors).
std::vector<std::pair<std::string, ingot::Array>> model_state() {
  using ingot::Array;
  using ingot::DType;
  return {{"dense/kernel", Array::full({4, 3}, 0.25, DType::kF32)},
          {"dense/bias", Array::full({3}, -1.0, DType::kF32)},
          {"__optimizer__/0000", Array::scalar(7, DType::kI64)},
          {"__optimizer__/0001", Array::scalar(0.01, DType::kF32)},
          {"__optimizer__/0002", Array::full({4, 3}, 0.5, DType::kF32)},
          {"__optimizer__/0003", Array::full({3}, 0.125, DType::kF32)}};
}

bool same_bytes(const ingot::Array& a, const ingot::Array& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ingot::fuzz::MemoryFile file("backup.safetensors", data, size);
  std::vector<std::pair<std::string, ingot::Array>> state = model_state();
  const std::vector<std::pair<std::string, ingot::Array>> before = model_state();
  bool refused = true;
  ingot::fuzz::expect_only_ingot_errors("fuzz_backup", [&] {
    const ingot::SafetensorsFile loaded = ingot::load_safetensors(file.path());
    (void)ingot::callbacks::detail::backup_epoch(loaded, file.path());
    std::vector<std::pair<std::string, ingot::Array*>> targets;
    for (auto& [name, array] : state) targets.emplace_back(name, &array);
    ingot::load_into(loaded, targets);
    refused = false;
  });
  if (refused) {
    for (size_t i = 0; i < state.size(); ++i) {
      if (!same_bytes(state[i].second, before[i].second)) {
        std::fprintf(stderr, "fuzz_backup: a refused backup changed '%s'\n", state[i].first.c_str());
        std::abort();
      }
    }
  }
  return 0;
}
