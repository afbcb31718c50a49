// libFuzzer target: the graph IR text parser (ir::parse_graph, which also verifies the graph).
// Oracle besides "no crash, only ingot::Error": a graph that parses prints to text that parses
// back to the same text (docs/ir.md's round-trip promise).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "ingot/ir/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ingot::fuzz::expect_only_ingot_errors("fuzz_ir_text", [&] {
    const ingot::ir::Graph graph = ingot::ir::parse_graph(text);
    const std::string printed = ingot::ir::print_graph(graph);
    const std::string again = ingot::ir::print_graph(ingot::ir::parse_graph(printed));
    if (again != printed) {
      std::fprintf(stderr, "fuzz_ir_text: print/parse round trip changed the graph:\n%s\n---\n%s\n", printed.c_str(),
                   again.c_str());
      std::abort();
    }
  });
  return 0;
}
