// The IR examples in docs/ir.md parse, verify and run, so the documentation cannot drift.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ingot/interp/interpreter.h"
#include "ingot/ir/text.h"
#include "test_util.h"

namespace ingot {
namespace {

std::vector<std::string> ir_examples(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  const std::string s = text.str();
  std::vector<std::string> out;
  for (size_t a = s.find("```\nfunc @"); a != std::string::npos; a = s.find("```\nfunc @", a + 1)) {
    const size_t b = s.find("\n```", a + 4);
    out.push_back(s.substr(a + 4, b - a - 4));
  }
  return out;
}

TEST(Docs, IrExamplesParseAndRun) {
  std::vector<std::string> examples = ir_examples(std::string(INGOT_SOURCE_DIR) + "/docs/ir.md");
  ASSERT_FALSE(examples.empty());
  for (const std::string& text : examples) {
    ir::Graph g = ir::parse_graph(text);
    EXPECT_EQ(ir::print_graph(ir::parse_graph(ir::print_graph(g))), ir::print_graph(g));
    std::vector<Array> args;
    for (ir::ValueId p : g.parameters()) args.push_back(Array::zeros(g.type(p).shape, g.type(p).dtype));
    EXPECT_EQ(interp::interpret(g, args).size(), g.outputs().size());
  }
}

}  // namespace
}  // namespace ingot
