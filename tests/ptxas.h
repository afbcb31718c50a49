// ptxas (the CUDA toolkit's PTX assembler) run as a subprocess by the `ptx` suites: the code
// generator's PTX (tests/compiler/codegen/cuda/) and the hand-written kernels' (tests/kernels/).
#pragma once

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

namespace ingot::testing {

/// The CUDA toolkit's ptxas; its absence skips the PTX tests with that reason.
inline const char* kPtxas = "/usr/local/cuda/bin/ptxas";

/// ptxas's verdict on one PTX text: exit status 0 or not, and everything it printed.
struct PtxasResult {
  bool ok = false;
  std::string output;
};

/// Assembles `ptx` for `arch` ("sm_90") into a cubin under the temporary directory (`name` names
/// the files); with `verbose`, ptxas -v prints each kernel's registers and shared memory.
inline PtxasResult run_ptxas(std::string_view ptx, const std::string& arch, const std::string& name,
                             bool verbose = false) {
  // One directory per process: ctest runs tests in parallel processes whose kernels share names
  // (main_kernel_1...), and a shared file was read by one ptxas while another test rewrote it.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ingot_ptxas_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / (name + "." + arch + ".ptx");
  std::ofstream(file) << ptx;
  const std::string cmd = std::string(kPtxas) + (verbose ? " -v" : "") + " -arch=" + arch + " " + file.string() +
                          " -o " + (dir / (name + "." + arch + ".cubin")).string() + " 2>&1";
  PtxasResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {false, "cannot run " + cmd};
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) r.output += buf.data();
  r.ok = pclose(pipe) == 0;
  std::error_code ec;  // leave nothing behind in the temporary directory
  std::filesystem::remove(file, ec);
  std::filesystem::remove(dir / (name + "." + arch + ".cubin"), ec);
  std::filesystem::remove(dir, ec);  // only when empty
  return r;
}

}  // namespace ingot::testing
