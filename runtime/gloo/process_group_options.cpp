// ProcessGroupOptions::from_env: the torchrun environment variables.
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <string>

#include "ingot/runtime/error.h"
#include "ingot/runtime/gloo.h"

namespace ingot {

namespace {

constexpr const char* kHint =
    "set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun sets them), e.g. RANK=0 "
    "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500";

std::string read_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("ProcessGroupOptions::from_env: environment variable {} is not set", name), kHint);
  }
  return value;
}

// The integer value of variable `name` in [lo, hi]; kInvalidArgument naming it and its value.
int read_int_env(const char* name, int lo, int hi, const std::string& range) {
  std::string text = read_env(name);
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("ProcessGroupOptions::from_env: {}='{}' is not an integer", name, text), kHint);
  }
  if (value < lo || value > hi) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("ProcessGroupOptions::from_env: {}={} is outside {}", name, value, range), kHint);
  }
  return value;
}

}  // namespace

ProcessGroupOptions ProcessGroupOptions::from_env() {
  ProcessGroupOptions g;
  g.world_size = read_int_env("WORLD_SIZE", 1, 1 << 20, "[1, 1048576]");
  g.rank = read_int_env("RANK", 0, g.world_size - 1, fmt::format("[0, WORLD_SIZE={})", g.world_size));
  g.master_addr = read_env("MASTER_ADDR");
  if (g.master_addr.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "ProcessGroupOptions::from_env: MASTER_ADDR='' is empty", kHint);
  }
  g.master_port = read_int_env("MASTER_PORT", 1, 65535, "[1, 65535]");
  return g;
}

}  // namespace ingot
