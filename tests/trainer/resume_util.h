// The model and data the resume tests share (backup_test.cpp, model_io_test.cpp): a run that is
// interrupted and resumed must end bitwise like an uninterrupted one.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "ingot/trainer/model.h"
#include "ingot/trainer/safetensors.h"

namespace ingot::testing {

/// Dense - Dropout - Dense trained by Adam with a schedule (or `optimizer`): a resume must
/// restore the weights, the dropout's seed state, Adam's moments and its iteration count.
inline std::shared_ptr<Sequential> make_model(std::shared_ptr<optimizers::Optimizer> optimizer = nullptr,
                                              std::shared_ptr<Layer> middle = nullptr, int64_t units = 8) {
  auto m = std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Layer>>{std::make_shared<Dense>(DenseOptions{.units = units, .activation = "relu"}),
                                          middle ? middle : std::make_shared<Dropout>(DropoutOptions{.rate = 0.25}),
                                          std::make_shared<Dense>(DenseOptions{.units = 3})});
  if (!optimizer) {
    optimizer = std::make_shared<optimizers::Adam>(optimizers::AdamOptions{
        .learning_rate = optimizers::schedules::CosineDecay({.initial_learning_rate = 0.01, .decay_steps = 40})});
  }
  m->compile({.optimizer = std::move(optimizer),
              .loss = std::make_shared<losses::SparseCategoricalCrossentropy>(
                  losses::SparseCategoricalCrossentropyOptions{.from_logits = true})});
  return m;
}

/// 40 samples of 4 features (a sine pattern) and 3 classes derived from them.
struct ResumeData {
  Array x = Array::zeros({40, 4}, DType::kF32), y = Array::zeros({40}, DType::kI32);
  ResumeData() {
    for (int64_t i = 0; i < 160; ++i) x.data<float>()[i] = std::sin(0.37f * static_cast<float>(i));
    for (int64_t i = 0; i < 40; ++i) y.data<int32_t>()[i] = x.data<float>()[4 * i] > 0 ? 1 : (i % 3 == 0 ? 2 : 0);
  }
};

/// The bytes of the file `p` ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

/// Every tensor of `got` equals `want`'s of the same name, byte for byte, and so do the
/// optimizer's iterations.
inline void expect_same_tensors(const std::filesystem::path& got, const std::filesystem::path& want) {
  const SafetensorsFile a = load_safetensors(got.string()), b = load_safetensors(want.string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << got;
  for (const auto& [name, array] : b.tensors) {
    auto it = std::find_if(a.tensors.begin(), a.tensors.end(), [&](const auto& t) { return t.first == name; });
    ASSERT_NE(it, a.tensors.end()) << name;
    ASSERT_EQ(it->second.nbytes(), array.nbytes()) << name;
    EXPECT_EQ(std::memcmp(it->second.raw_data(), array.raw_data(), static_cast<size_t>(array.nbytes())), 0)
        << got << ": " << name;
  }
  EXPECT_EQ(a.metadata.at("iterations"), b.metadata.at("iterations")) << got;
}

}  // namespace ingot::testing
