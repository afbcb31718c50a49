// Four CPU virtual devices on a mesh axis "batch" with a local Gloo group, the fixture of the SPMD
// tests (tests/runtime/spmd_test.cpp, tests/compiler/codegen/spmd_compile_test.cpp).
#pragma once

#include <memory>
#include <vector>

#include "ingot/runtime/gloo.h"
#include "ingot/runtime/runtime.h"
#include "ingot/runtime/sharding.h"

namespace ingot::testing {

struct FourDevices {
  Runtime runtime{RuntimeOptions{.num_cpu_devices = 4}};
  Mesh mesh{{{"batch", 4}}, runtime.devices()};
  std::vector<std::unique_ptr<Communicator>> group = make_local_gloo_group(4);
  /// Rank p talks for mesh device p.
  std::vector<Communicator*> comms() const {
    std::vector<Communicator*> c;
    for (const auto& g : group) c.push_back(g.get());
    return c;
  }
  NamedSharding split() const { return NamedSharding(mesh, PartitionSpec{"batch"}); }
  NamedSharding replicated() const { return NamedSharding(mesh, PartitionSpec{}); }
};

}  // namespace ingot::testing
