// Helpers of the `kernels` test suite (the hand-written CUDA kernels of kernels/cuda/): each
// kernel's registers and static shared memory from ptxas -v (tests/ptxas.h runs it), and small
// comparison helpers.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "ptxas.h"

namespace ingot::testing {

/// Per kernel: registers per thread and static shared memory (bytes), from ptxas -v's output.
struct KernelResources {
  int64_t registers = 0;
  int64_t shared_bytes = 0;
  int64_t spill_bytes = 0;
};

inline std::map<std::string, KernelResources> parse_ptxas_resources(const std::string& output) {
  std::map<std::string, KernelResources> out;
  const std::regex entry(R"(Compiling entry function '([A-Za-z0-9_]+)')");
  const std::regex used(R"(Used ([0-9]+) registers)");
  const std::regex smem(R"(([0-9]+) bytes smem)");
  const std::regex spill(R"(([0-9]+) bytes spill stores)");
  std::string current;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) current = m[1];
    if (current.empty()) continue;
    if (std::regex_search(line, m, used)) out[current].registers = std::stoll(m[1]);
    if (std::regex_search(line, m, smem)) out[current].shared_bytes = std::stoll(m[1]);
    if (std::regex_search(line, m, spill)) out[current].spill_bytes = std::stoll(m[1]);
  }
  return out;
}

/// `n` uniform floats in [lo, hi) from a fixed seed.
inline std::vector<float> random_floats(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

/// Every element of `got` is within atol + rtol * |want| of `want`.
inline void expect_close(std::span<const float> got, std::span<const double> want, double atol, double rtol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " [" << i << "]";
  }
}

}  // namespace ingot::testing
