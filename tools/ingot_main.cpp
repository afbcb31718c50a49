// `ingot`: the command-line entry point. Subcommands: demo, ops, run.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <new>

#include "demo.h"
#include "ingot/ir/op_registry.h"

int main(int argc, char** argv) {
  CLI::App app{"ingot: tensor compiler, runtime and trainer"};
  app.require_subcommand(1);

  ingot::cli::DemoOptions demo;
  CLI::App* demo_cmd = app.add_subcommand(
      "demo", "trace an MLP forward pass, print its IR, interpret it on random data");
  demo_cmd->add_option("--batch", demo.batch, "rows of the input batch")->capture_default_str();
  demo_cmd->add_option("--features", demo.features, "input features")->capture_default_str();
  demo_cmd->add_option("--hidden", demo.hidden, "hidden units")->capture_default_str();
  demo_cmd->add_option("--classes", demo.classes, "output classes")->capture_default_str();
  demo_cmd->add_option("--seed", demo.seed, "seed of weights and inputs")->capture_default_str();

  CLI::App* ops_cmd = app.add_subcommand("ops", "list the IR ops the registry knows");

  std::string ir_path;
  std::vector<std::string> passes;
  uint64_t seed = 0;
  bool print_only = false;
  CLI::App* run_cmd = app.add_subcommand(
      "run", "parse an IR text file, apply passes, print it and interpret it on random inputs");
  run_cmd->add_option("file", ir_path, "IR text file (format: docs/ir.md)")->required();
  run_cmd->add_option("--passes", passes, "passes to apply in order: dce, cse")->delimiter(',');
  run_cmd->add_option("--seed", seed, "seed of the random arguments")->capture_default_str();
  run_cmd->add_flag("--print-only", print_only, "print the IR without interpreting it");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*demo_cmd) return ingot::cli::run_demo(demo, std::cout);
    if (*ops_cmd) {
      const auto& reg = ingot::ir::OpRegistry::builtin();
      for (const std::string& name : reg.names()) {
        fmt::print("{:<24} {}\n", name, reg.get(name).summary);
      }
      return 0;
    }
    if (*run_cmd) return ingot::cli::run_ir_file(ir_path, passes, seed, !print_only, std::cout);
  } catch (const ingot::Error& e) {
    fmt::print(stderr, "ingot: error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "ingot: error: out of host memory (hint: use smaller shapes)\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ingot: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
